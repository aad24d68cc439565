# Sourced at the start of every GPU-machine command: Optuna (and the plot's needs) from the
# carried wheels, this checkout on the path, unbuffered output.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
python3 -c "import torch, optuna, matplotlib; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'optuna', optuna.__version__, 'cpus', len(__import__('os').sched_getaffinity(0)))"
