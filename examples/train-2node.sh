#!/bin/bash
#SBATCH --job-name=train-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=4
#SBATCH --mem=256G
#SBATCH --time=00:10:00
#SBATCH --output=train-%j.out
# A 16-GPU training job over two whole nodes: srun starts one task per
# GPU on both nodes, each with the variables torchrun-style launchers
# read (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, CUDA_VISIBLE_DEVICES).
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_NNODES nodes, $SLURM_NTASKS tasks)"
srun -l --gpus-per-task=1 bash -c 'echo "$SLURMD_NODENAME rank $RANK/$WORLD_SIZE local $LOCAL_RANK GPU $CUDA_VISIBLE_DEVICES master $MASTER_ADDR:$MASTER_PORT"' | sort -n
for step in 1 2 3; do echo "step $step"; sleep 1; done
