# Types of autobatch.serialization; checked by stubtest in CI (.ci/stubs).
from typing import IO, Any, Iterable, Iterator

import numpy as np
import numpy.typing as npt

from autobatch.parameters import ParameterCollection

_Dest = str | IO[bytes]
_Record = tuple[str, tuple[int, ...], npt.NDArray[np.float32]]

MAGIC: bytes
MAGIC_V1: bytes
META_FORMAT: str
META_VERSION: int
MAX_HEADER: int
MAX_NAME: int
MAX_SPEC_DEPTH: int
KINDS: dict[type, str]

class ModelFileError(ValueError): ...

def write_records(dest: _Dest, named_params: Iterable[tuple[str, Any]], append: bool = False) -> str: ...
def parse_records(data: bytes, label: str) -> tuple[dict[str, _Record], list[bytes], str | None]: ...
def read_records(src: _Dest) -> dict[str, _Record]: ...
def save_collection(pc: ParameterCollection, dest: _Dest, key: str = "", append: bool = False) -> None: ...
def save(basename: str, objects: Iterable[Any], format: str | None = None) -> None: ...
def load(basename: str, params: ParameterCollection, allow_v1: bool = False) -> list[Any]: ...
def load_generator(basename: str, params: ParameterCollection,
                   allow_v1: bool = False) -> Iterator[Any]: ...
