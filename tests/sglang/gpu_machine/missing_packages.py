"""pytest plugin for a GPU machine without sglang's dependencies: import-time stand-ins.

sglang 0.5.23's wheel is built for CPython 3.11 and the GPU machine runs 3.12 with no
network, so `tests/sglang` runs there on sglang's Python source (carry.sh) while the
third-party packages sglang binds at import and this test path never calls stay absent.
This plugin (`-p missing_packages`) makes each of those a permissive stand-in whose
attributes are names only, announced once on stderr, and only when the package is
really missing (a finder consulted last); sgl_kernel and flashinfer (CUDA binaries
sglang imports on CUDA) are always stood in for. Anything the test really uses (torch,
triton, sglang's Triton kernels, msgspec for sglang's structs) is real.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

ALWAYS = frozenset({"sgl_kernel", "flashinfer"})
WHEN_MISSING = frozenset(
    [
        "IPython",
        "PIL",
        "aiohappyeyeballs",
        "aiohttp",
        "aiosignal",
        "annotated_types",
        "anyio",
        "asttokens",
        "backcall",
        "certifi",
        "charset_normalizer",
        "compressed_tensors",
        "decorator",
        "dill",
        "distro",
        "einops",
        "executing",
        "frozenlist",
        "gguf",
        "h11",
        "httpcore2",
        "httpx",
        "httpx2",
        "huggingface_hub",
        "idna",
        "jedi",
        "loguru",
        "msgspec",
        "multidict",
        "openai",
        "orjson",
        "outcome",
        "parso",
        "partial_json_parser",
        "pexpect",
        "pickleshare",
        "prompt_toolkit",
        "propcache",
        "psutil",
        "ptyprocess",
        "pure_eval",
        "pybase64",
        "pydantic",
        "pydantic_core",
        "pygments",
        "regex",
        "requests",
        "safetensors",
        "scipy",
        "sentencepiece",
        "sniffio",
        "stack_data",
        "starlette",
        "tokenizers",
        "torchvision",
        "tqdm",
        "traitlets",
        "transformers",
        "trio",
        "truststore",
        "tvm_ffi",
        "typing_inspection",
        "urllib3",
        "yarl",
        "zmq",
    ]
)
"""Third-party packages sglang imports on this test path (found on the CPU machine)."""

_PYTHON_PROTOCOL = (
    set(dir(object))
    | set(dir(type))
    | {
        "__path__", "__file__", "__spec__", "__loader__", "__wrapped__", "__mro_entries__",
        "__set_name__", "__signature__", "__origin__", "__args__", "__parameters__",
        "__dataclass_fields__", "__annotations__", "__get__", "__set__", "__delete__",
        "__class_getitem__", "__length_hint__", "__fspath__", "__index__", "__float__",
        "__int__", "__await__", "__aiter__", "__iter__", "__next__", "__enter__", "__exit__",
        "__copy__", "__deepcopy__", "__getstate__", "__setstate__", "__isabstractmethod__",
        "__objclass__", "__len__", "__bool__", "__call__", "__getitem__", "__contains__",
        "__all__", "__torch_function__", "__torch_dispatch__", "__array__",
        "__array_interface__", "__cuda_array_interface__", "__dlpack__", "__code__",
        "__func__", "__self__", "__slots__", "__weakref__",
    }
)  # fmt: skip
_announced: set[str] = set()


class _StandInMeta(type):
    """Classes whose every attribute is another stand-in class."""

    def __getattr__(cls, name: str) -> Any:
        if name in _PYTHON_PROTOCOL:
            raise AttributeError(name)
        return _stand_in(name)

    def __getitem__(cls, item: object) -> Any:
        return cls

    def __setitem__(cls, key: object, value: object) -> None:
        return None

    def __contains__(cls, item: object) -> bool:
        return False

    def __len__(cls) -> int:
        return 0

    def __iter__(cls) -> Any:
        return iter(())

    def __bool__(cls) -> bool:
        return False

    def __or__(cls, other: object) -> Any:
        return cls

    __ror__ = __or__

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator
        return type.__call__(cls)


class _StandIn(metaclass=_StandInMeta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if name in _PYTHON_PROTOCOL:
            raise AttributeError(name)
        return _stand_in(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _stand_in("result")()

    def __getitem__(self, item: object) -> Any:
        return _stand_in("item")()

    def __setitem__(self, key: object, value: object) -> None:
        return None

    def __contains__(self, item: object) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name == "__version__":
            return "99.0.0"
        if name in _PYTHON_PROTOCOL:
            raise AttributeError(name)
        return _stand_in(name)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _AlwaysFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: the CUDA-binary packages."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in ALWAYS:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


class _MissingFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: reached only when no real finder found the module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top = fullname.partition(".")[0]
        if top not in WHEN_MISSING:
            return None
        if fullname != top and top not in _announced:
            return None  # a missing submodule of a real package stays an ImportError
        if top not in _announced:
            _announced.add(top)
            sys.stderr.write(f"[missing_packages] stand-in for {top}\n")
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def _stand_in(name: str) -> Any:
    return _StandInMeta(name, (_StandIn,), {})


sys.meta_path.insert(0, _AlwaysFinder())
sys.meta_path.append(_MissingFinder())
