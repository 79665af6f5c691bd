"""nbval's kernel start, made to survive a busy machine. Not a lesson file.

jupyter_client picks a kernel's five ports by binding port 0 and closing it; the kernel binds them a
moment later. On a loaded machine (xdist workers, the local test servers all binding port 0) another
process can take one in between, and the kernel exits at once: nbval then errors every cell of the
notebook with "Kernel died before replying to kernel_info" (CI saw this). A kernel that dies while
starting is started again, with new ports, up to three times; what it wrote to stderr is shown as a
warning, so the cause stays visible instead of going to nbval's /dev/null.
"""

import tempfile
import warnings

import nbval.kernel

ATTEMPTS = 3


def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
    """nbval.kernel.start_new_kernel, tried again when the kernel dies before it is ready."""
    kwargs.pop("stderr", None)  # nbval sends it to /dev/null; keep it to say why it died
    for attempt in range(1, ATTEMPTS + 1):
        with tempfile.TemporaryFile("w+") as stderr:
            try:
                return _start(startup_timeout, kernel_name, stderr=stderr, **kwargs)
            except RuntimeError as exc:
                stderr.seek(0)
                said = stderr.read()[-2000:].strip() or "(nothing on stderr)"
                if attempt == ATTEMPTS:
                    raise RuntimeError(f"{exc} ({ATTEMPTS} tries); it said:\n{said}") from exc
                note = f"kernel start {attempt} failed ({exc}); starting it again. It said:\n{said}"
                warnings.warn(note, stacklevel=2)
    raise AssertionError("unreachable")


_NBVALS_OWN = nbval.kernel.start_new_kernel  # kept before install() replaces it


def _start(startup_timeout, kernel_name, **kwargs):
    """One try: nbval's own start (it shuts a kernel that died down before raising)."""
    return _NBVALS_OWN(startup_timeout=startup_timeout, kernel_name=kernel_name, **kwargs)


def install():
    """Make nbval start its kernels this way (both conftests call it; twice is harmless)."""
    nbval.kernel.start_new_kernel = start_new_kernel


def execute(nb, env=None, **options):
    """nbclient's NotebookClient(nb, **options).execute(env=env), with a kernel that dies while
    starting started again, as above (the tests that run a notebook their own way use this)."""
    from nbclient import NotebookClient

    for attempt in range(1, ATTEMPTS + 1):
        try:
            return NotebookClient(nb, **options).execute(env=env)
        except RuntimeError as exc:  # a cell's error is a CellExecutionError, never this
            if "before replying to kernel_info" not in str(exc) or attempt == ATTEMPTS:
                raise
            warnings.warn(f"kernel start {attempt} failed ({exc}); starting it again", stacklevel=2)
    raise AssertionError("unreachable")
