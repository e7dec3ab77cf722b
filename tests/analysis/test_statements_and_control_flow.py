"""How the walk runs statements: branches join, loops run twice (the first time recording
nothing), grad mode follows `with` blocks and decorators, unknowns stay unknown."""

from __future__ import annotations

from review_copies.analysis import roots
from review_copies.analysis.events import Accumulate, Backward, Bind, Return, Store, Use, Write
from review_copies.analysis.values import Device, Kind, Tri
from tests.analysis.helpers import bound, flow


def test_the_arms_of_an_if_join() -> None:
    f = flow("""
    import torch
    def f(flag):
        if flag:
            x = torch.zeros(2)
        else:
            x = torch.zeros(2, device="cuda")
        return x
    """)
    (ret,) = f.of(Return)
    assert ret.value.kind is Kind.TENSOR
    assert ret.value.device is Device.MAYBE_CUDA  # cpu on one path, cuda on the other
    assert len(ret.value.roots) == 2  # either storage


def test_a_second_if_on_the_same_flag_takes_the_arm_the_first_took() -> None:
    # ultralytics' `preprocess`: the caller's tensor reaches `im` only where `not_tensor`
    # fails, so the write under the second `if not_tensor:` lands in the array-made tensor.
    f = flow("""
    import numpy as np
    import torch
    def f(im: torch.Tensor, not_tensor: bool):
        if not_tensor:
            im = torch.from_numpy(np.stack(im))
        im = im.to("cuda")
        if not_tensor:
            im /= 255
        if not not_tensor:
            im *= 2
        return im
    """)
    scaled, doubled = f.of(Write)
    assert roots.argument("im") not in scaled.target.roots
    assert doubled.target.roots == {roots.argument("im")}


def test_a_tensor_and_a_list_join_to_unknown() -> None:
    f = flow("""
    import torch
    def f(flag):
        x = torch.zeros(2) if flag else [1, 2]
        return x
    """)
    (ret,) = f.of(Return)
    assert ret.value.kind is Kind.UNKNOWN


def test_try_except_joins_what_each_handler_leaves() -> None:
    f = flow("""
    import torch
    def f():
        try:
            y = torch.ones(1)
        except ValueError:
            y = None
        return y
    """)
    (ret,) = f.of(Return)
    assert ret.value.kind is Kind.UNKNOWN  # a tensor or None


def test_match_cases_join() -> None:
    f = flow("""
    import torch
    def f(mode):
        match mode:
            case "a":
                y = torch.ones(1)
            case _:
                y = torch.zeros(1)
        return y
    """)
    (ret,) = f.of(Return)
    assert ret.value.kind is Kind.TENSOR and len(ret.value.roots) == 2


def test_a_loop_body_is_recorded_once_with_its_loop() -> None:
    f = flow("""
    import torch
    def f(n):
        acc = torch.zeros(1)
        for i in range(n):
            acc.add_(1)
    """)
    writes = list(f.of(Write))
    assert len(writes) == 1  # the replay that settles loop-carried values records nothing
    (loop_id,) = writes[0].loops
    assert f.loops[loop_id].start == 4


def test_a_loop_carried_value_settles_before_the_recorded_pass() -> None:
    f = flow("""
    import torch
    def f(loader, model):
        total = 0
        for x in loader:
            loss = model(x).sum()
            total += loss
        return total
    """)
    (acc,) = f.of(Accumulate)
    assert acc.name == "total" and acc.value.attached
    # On the recorded pass `total` already holds last iteration's tensor.
    assert acc.before.kind in (Kind.TENSOR, Kind.UNKNOWN)


def test_an_event_after_the_loop_runs_once_and_one_in_it_may_run_again() -> None:
    f = flow("""
    import torch
    def f(n):
        x = torch.zeros(1)
        for _ in range(n):
            y = x + 1
        z = x + 2
    """)
    y_bind = bound(f, "y")[0]
    reads = [u for u in f.of(Use) if u.name == "x"]
    in_loop = next(u for u in reads if u.loops)
    after = next(u for u in reads if not u.loops)
    assert in_loop in list(f.after(y_bind))  # the next iteration reads x again
    assert after in list(f.after(y_bind)) and after.index > y_bind.index


def test_no_grad_blocks_and_decorators_turn_grad_off() -> None:
    flows_ = {
        name: flow(source, name)
        for name, source in {
            "block": """
            import torch
            def block(model, x):
                with torch.no_grad():
                    y = model(x)
                return y
            """,
            "decorated": """
            import torch
            @torch.no_grad()
            def decorated(model, x):
                y = model(x)
                return y
            """,
            "inference": """
            import torch
            def inference(model, x):
                with torch.inference_mode():
                    y = model(x)
                return y
            """,
        }.items()
    }
    for name, f in flows_.items():
        (y,) = bound(f, "y")
        assert y.value.grad is Tri.NO and y.no_grad, name


def test_set_grad_enabled_false_is_no_grad() -> None:
    f = flow("""
    import torch
    def f(model, x):
        with torch.set_grad_enabled(False):
            y = model(x)
    """)
    assert bound(f, "y")[0].value.grad is Tri.NO


def test_no_grad_of_torch_bound_at_run_time_turns_grad_off() -> None:
    f = flow("""
    def _torch():
        import torch
        return torch, torch.nn
    def f(model, x):
        torch, _ = _torch()
        with torch.no_grad():
            y = model(x)
        z = model(x)
    """)
    assert bound(f, "y")[0].value.grad is Tri.NO
    assert bound(f, "z")[0].value.grad is not Tri.NO


def test_lightning_evaluation_hooks_run_with_grad_off() -> None:
    source = """
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import Callback
    class LogImage(Callback):
        def on_validation_epoch_end(self, trainer, model):
            y = model(trainer.x)
        def on_train_epoch_end(self, trainer, model):
            y = model(trainer.x)
    class Plain:
        def on_validation_epoch_end(self, trainer, model):
            y = model(trainer.x)
    """
    assert bound(flow(source, "LogImage.on_validation_epoch_end"), "y")[0].value.grad is Tri.NO
    assert bound(flow(source, "LogImage.on_train_epoch_end"), "y")[0].value.grad is not Tri.NO
    assert bound(flow(source, "Plain.on_validation_epoch_end"), "y")[0].value.grad is not Tri.NO


def test_an_unknown_function_gives_an_unknown_value() -> None:
    f = flow("""
    import torch
    from mylib import transform
    def f(x: torch.Tensor):
        y = transform(x)
        return y
    """)
    assert bound(f, "y")[0].value.kind is Kind.UNKNOWN


def test_an_unannotated_argument_nothing_is_known_of_is_unknown() -> None:
    f = flow("""
    def f(x):
        return x
    """)
    assert f.params["x"].kind is Kind.UNKNOWN and f.params["x"].grad is Tri.MAYBE


def test_stores_into_containers_and_onto_self_are_recorded() -> None:
    # `self.history` is a list because __init__ made it one; methods see __init__'s attributes.
    f = flow("""
    import torch
    class Tracker:
        def __init__(self):
            self.history = []
            self.table = {}

        def update(self, loss):
            self.history.append(loss)
            self.last = loss
            self.table["k"] = loss
    """, "Tracker.update")
    assert {s.how for s in f.of(Store)} == {"append", "setattr", "setitem"}


def test_a_method_call_on_an_attribute_nothing_is_known_of_stores_nothing() -> None:
    f = flow("""
    class Tracker:
        def update(self, loss):
            self.history.append(loss)
    """, "Tracker.update")
    assert not list(f.of(Store))


def test_backward_is_recorded_on_its_receiver() -> None:
    f = flow("""
    def f(model, x):
        loss = model(x).sum()
        loss.backward()
    """)
    (b,) = f.of(Backward)
    assert b.value.roots == bound(f, "loss")[0].value.roots


def test_a_del_forgets_the_name() -> None:
    f = flow("""
    import torch
    def f():
        a = torch.ones(1)
        del a
        return a
    """)
    (ret,) = f.of(Return)
    assert ret.value.kind is Kind.UNKNOWN


def test_a_walrus_binds_inside_an_expression() -> None:
    f = flow("""
    import torch
    def f():
        if (n := torch.ones(2)).sum() > 0:
            return n
    """)
    assert bound(f, "n")[0].value.is_tensor


def test_a_comprehension_binds_its_element_and_forgets_it_after() -> None:
    f = flow("""
    import torch
    def f(model):
        ps = [p.detach().clone() for p in model.parameters()]
        return p
    """)
    ps = bound(f, "ps")[0].value
    assert ps.kind is Kind.LIST and ps.element is not None and ps.element.is_tensor
    assert not any(isinstance(e, Bind) and e.name == "p" and not e.loops for e in f.events if e.line == 4)
