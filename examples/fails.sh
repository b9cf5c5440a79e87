#!/bin/sh
#SBATCH -J fails
#SBATCH -o fails-%j.out
# Ends with exit 3: sacct shows FAILED 3:0.
echo "about to fail"
exit 3
