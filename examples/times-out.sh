#!/bin/sh
#SBATCH -J times-out
#SBATCH -t 0:05
#SBATCH -o timeout-%j.out
# Asks for five seconds (Slurm's M:S form) and sleeps longer: ends TIMEOUT.
sleep 300
