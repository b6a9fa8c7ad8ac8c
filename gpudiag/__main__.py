"""``python -m gpudiag``: the same command line as the ``gpudiag`` script."""

from gpudiag.cli import main

if __name__ == "__main__":
    main()
