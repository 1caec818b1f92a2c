"""The capture side: a live exception read from its objects (live), fd 2 teed (fdtee), the excepthooks,
IPython and pytest (hooks, pytest_plugin), `kbdebug run` (runner, job_end) and the crash service's client
(reporting). It sits above the pipeline and hands it plain data."""
