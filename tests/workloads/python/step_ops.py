"""The step of launch_step.py and kentry_step.py: 40 operators on small "tensors", as a
PyTorch step runs them (tests/gpu/step_bench.py's step on these), each calling
Tensor.launch once. The workload sets Tensor.launch to a function of the tensor before
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


def step():
    a = X
    for _ in range(20):
        a = a * 1.0001  # one kernel
        a = a + Y  # and another
    return a
