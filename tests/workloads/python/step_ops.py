"""The step of launch_step.py, kentry_step.py and tests/gpu/step_bench.py: 40 operators on
small tensors, each calling Tensor.launch once on these (a PyTorch kernel launch on
step_bench.py's). The workload sets Tensor.launch to a function of the tensor before
the first step: what an operator does outside Python (a kernel launch, a system call)."""


class Tensor:
    launch = None

    def __init__(self, v):
        self.v = v

    def __mul__(self, k):
        self.launch()
        return Tensor(self.v * k)

    def __add__(self, o):
        self.launch()
        return Tensor(self.v + o.v)


X, Y = Tensor(1.0), Tensor(2.0)


def step(x=X, y=Y):
    """One step on X and Y: these tensors by default, PyTorch's in tests/gpu/step_bench.py."""
    a = x
    for _ in range(20):
        a = a * 1.0001  # one kernel
        a = a + y  # and another
    return a
