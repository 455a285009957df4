"""Compose Hydra overrides (a JSON list on stdin) against the installed verl's own trainer config, as
`python -m verl.trainer.main_ppo` does before it starts; exit 1 with Hydra's message when one does not fit.

Run with the Python of verl's environment (`make install-verl`).
"""

import importlib.util
import json
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

overrides = json.load(sys.stdin)
# Found without importing verl, which is slow to import.
config_dir = Path(importlib.util.find_spec("verl").submodule_search_locations[0]) / "trainer" / "config"
try:
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
except Exception as exc:  # Hydra's composition errors have several types
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(1)
print(json.dumps(OmegaConf.to_container(config, resolve=False)))
