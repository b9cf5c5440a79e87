#!/bin/bash
#SBATCH -J hello-gpu
#SBATCH -o out-%j.txt
#SBATCH -t 1:00
#SBATCH --gpus=2
# A researcher's smallest GPU job: it sees its id and exactly two GPUs.
echo $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES
echo "running on $(hostname) as $(id -un) in $PWD"
echo "nodes: $SLURM_JOB_NODELIST tasks: $SLURM_NTASKS partition: $SLURM_JOB_PARTITION"
