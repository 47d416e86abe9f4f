from collections.abc import Sequence

import numpy as np

def assign_all(targets: Sequence[np.ndarray], sources: Sequence[np.ndarray | None]) -> None: ...
