#!/bin/bash
#SBATCH -J eval-small -c 4 --mem=16G
#SBATCH --gpus=1 --time=2:00
#SBATCH -o eval-%j.out
# A short evaluation on one GPU.
echo "eval $SLURM_JOB_ID on GPU $CUDA_VISIBLE_DEVICES with $SLURM_CPUS_PER_TASK CPUs"
sleep 2
echo "accuracy 0.913"
