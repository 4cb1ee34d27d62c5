"""Reading an external benchmark file (CANARD, LoCoMo): a non-empty JSON array, or an
InputError that says what is wrong with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from threadline.errors import InputError


def read_records(path: Path, *, what: str) -> list[Any]:
    """The records of a JSON file holding a non-empty array of ``what``."""
    try:
        records = json.loads(path.read_text("utf-8"))
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text") from err
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not JSON: {err}",
                         hint=f"the file must be a JSON array of {what}") from err
    if not isinstance(records, list) or not records:
        raise InputError(f"{path} must hold a non-empty JSON array of {what}")
    return records
