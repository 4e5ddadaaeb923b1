"""Files written whole, for the project's Python scripts: through a private temporary beside
the file, renamed onto it once complete (a reader, or a concurrent writer, never sees part of
one; a failure leaves nothing), and never over the input it is made from."""
import contextlib
import os
import sys
import tempfile


def refuse_input(dst, src, who):
    """Exits naming both when dst is the file src (by any path: a link, another spelling)."""
    if src and os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        sys.exit(f"{who}: {dst} is the input {src}: not written over")


@contextlib.contextmanager
def whole_file(dst, mode="w", src=None, who=None):
    """`with whole_file(dst, src=INPUT) as f:` writes dst through a temporary beside it (mode
    0666 less the umask, as open() gives), renamed onto dst only when the block succeeds."""
    refuse_input(dst, src, who or os.path.basename(sys.argv[0]))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)), prefix=os.path.basename(dst) + ".tmp.")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
        os.replace(tmp, dst)
    except BaseException:
        os.unlink(tmp)
        raise
