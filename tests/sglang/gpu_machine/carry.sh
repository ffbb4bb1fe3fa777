#!/usr/bin/env bash
# Build .gpu/ (git-ignored, carried to the GPU machine): sglang 0.5.23's Python source from
# the installed wheel (no extension modules, no multimodal_gen/test/models), its JIT kernel
# headers, its dist-info, dill, msgspec for CPython 3.12, and this folder's plugin.
# Run on the GPU machine (see docs/sglang.md):
#   PYTHONPATH=$PWD:$PWD/.gpu/site:$PWD/.gpu PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python3 -m pytest \
#     -p missing_packages -p prtoggle.pytest_plugin -m gpu tests/sglang
set -euo pipefail
cd "$(dirname "$0")/../../.."
site_packages="$(python -c 'import sglang, pathlib; print(pathlib.Path(sglang.__file__).parents[1])')"
rm -rf .gpu && mkdir -p .gpu/site
(cd "$site_packages" && find sglang -name '*.py' -not -path '*/__pycache__/*' \
  -not -path 'sglang/multimodal_gen/*' -not -path 'sglang/test/*' -not -path 'sglang/srt/models/*' \
  -exec cp --parents {} "$OLDPWD/.gpu/site/" \;)
cp -r "$site_packages"/sglang/kernels/jit/include "$site_packages"/sglang/kernels/jit/csrc \
  .gpu/site/sglang/kernels/jit/
cp -r "$site_packages"/sglang-0.5.23.dist-info .gpu/site/ && rm -f .gpu/site/sglang-0.5.23.dist-info/RECORD
wheels="$(mktemp -d)"
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 msgspec==0.22.0 -d "$wheels"
(cd .gpu/site && unzip -q -o "$wheels"/msgspec-*.whl)
cp -r "$site_packages"/dill .gpu/site/  # pure Python; sglang pickles a class with it at import
cp tests/sglang/gpu_machine/missing_packages.py .gpu/
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
du -sh .gpu
