#!/bin/bash
#SBATCH --job-name=train-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=4
#SBATCH --mem=256G
#SBATCH --time=00:10:00
#SBATCH --output=train-%j.out
# A 16-GPU training job over two whole nodes. (srun arrives with the
# workflows issue; here the batch script runs on the first node.)
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_NNODES nodes, $SLURM_NTASKS tasks)"
echo "GPUs on the first node: $CUDA_VISIBLE_DEVICES"
for step in 1 2 3; do echo "step $step"; sleep 1; done
