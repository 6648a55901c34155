"""How long `mosaictool --help` takes, beside a bare interpreter and a bare `import torch`.

`--help` imports neither torch nor spaCy (tests/test_packaging.py checks the imports); this prints
what that buys, as ratios measured in the same run (median of --repeat runs each):

    python perf/startup_speed.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from mosaictool.console import console_logging

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "mosaictool --help": [sys.executable, "-m", "mosaictool", "--help"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
}


def median_seconds(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    console_logging()  # the library's messages on stderr, as the mosaictool command shows them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    subprocess.run(COMMANDS["python -c 'import torch'"], capture_output=True, check=True)  # warm the file cache
    seconds = {name: median_seconds(argv, args.repeat) for name, argv in COMMANDS.items()}
    for name, s in seconds.items():
        print(f"{name:28s} {s:6.2f} s")
    help_s, torch_s = seconds["mosaictool --help"], seconds["python -c 'import torch'"]
    print(f"--help takes {help_s / torch_s:.2f}x the time of importing torch alone")


if __name__ == "__main__":
    main()
