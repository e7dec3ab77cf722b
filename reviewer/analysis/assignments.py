"""What assignments do to the walker's state: a name rebound (its old attributes
forgotten), an attribute or an item stored, `x += y` written in place or accumulated, a
tuple unpacked. The statement walker (`analysis.interpreter`) runs them."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import parameters
from review_copies.analysis.context import Context
from review_copies.analysis.events import Accumulate, Bind, Store, Write
from review_copies.analysis.guesses import backward_reaches
from review_copies.analysis.narrowing import type_test
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, dotted, item_key
from review_copies.analysis.values import UNKNOWN, Device, Kind, Tri, Value


class Assignments(Context):
    def assign(self, target: cst.BaseExpression, value: Value, expr: cst.BaseExpression | None) -> None:
        value = value.but(fresh=False, vector=value.vector)
        if isinstance(target, cst.Name):
            self.assign_name(target, value, expr)
        elif isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and dotted(target.value):
            owner_key = dotted(target.value)
            if owner_key not in self.state:
                self.state[owner_key] = self.ev(target.value)
            flag = isinstance(expr, cst.Name) and expr.value == "True"
            grad = Tri.YES if flag else Tri.NO if isinstance(expr, cst.Name) and expr.value == "False" else Tri.MAYBE
            # Setting the flag raises on anything but a leaf: past this line the tensor is one,
            # with no graph behind it (unlike `requires_grad_(True)`, a no-op on a non-leaf).
            self.set_grad_flag(target.value, self.state[owner_key].but(grad=grad, leaf=grad is Tri.YES, graph=frozenset()))
        elif isinstance(target, cst.Attribute):
            self.assign_attribute(target, value, expr)
        elif isinstance(target, cst.Subscript):
            self.assign_item(target, value, expr)
        elif isinstance(target, (cst.Tuple, cst.List)):
            parts = [el.value for el in target.elements]
            starred = any(isinstance(el, cst.StarredElement) for el in target.elements)
            for i, part in enumerate(parts):
                if value.items is not None and len(value.items) == len(parts) and not starred:
                    item = value.items[i]
                elif value.element is not None:
                    item = value.element
                else:
                    # (`feat, _ = G(img.cuda())`: what a network run on the GPU hands back is there)
                    item = UNKNOWN.but(device=Device.CUDA) if value.kind in (Kind.UNKNOWN, Kind.TENSOR) and value.device is Device.CUDA else UNKNOWN
                if isinstance(target.elements[i], cst.StarredElement):
                    item = Value(kind=Kind.LIST, element=value.element)
                self.assign(part, item, None)
        elif isinstance(target, cst.StarredElement):
            self.assign(target.value, Value(kind=Kind.LIST, element=value.element), None)

    def assign_name(self, target: cst.Name, value: Value, expr: cst.BaseExpression | None) -> None:
        name = target.value
        if (
            name in self.backward_names
            and value.kind in (Kind.TENSOR, Kind.UNKNOWN)
            and value.grad is not Tri.NO
            and backward_reaches(self.file.lines, name, self.line(target), self.scope.end if self.scope is not None else None)
        ):
            # backward() is called on it: it is attached to the graph.
            value = value.but(kind=Kind.TENSOR, grad=Tri.YES)
        if not value.origin:
            value = value.but(origin=f"`{name}`", vector=value.vector)
        prefix = name + "."
        for stale in [k for k in self.state if k.startswith(prefix) or k.startswith(name + "[") or k.endswith(f"[{name}]")]:
            del self.state[stale]  # `sample.w` was the previous object's attribute (a loop's last item, `a = b`); `d[k]` another entry
        self.state[name] = value
        self._remember_type_test(name, expr)
        self.emit(Bind, target, name=name, value=value, expr=expr)

    def _remember_type_test(self, name: str, expr: cst.BaseExpression | None) -> None:
        for flag, test in list(self.type_tests.items()):
            subject, _ = type_test(test)
            if flag == name or (subject is not None and dotted(subject) == name):
                del self.type_tests[flag]  # the flag, or what it tested, is bound anew
        if expr is not None and type_test(expr)[0] is not None:
            self.type_tests[name] = expr

    def assign_attribute(self, target: cst.Attribute, value: Value, expr: cst.BaseExpression | None) -> None:
        owner = dotted(target.value)
        key = dotted(target)
        if key and not value.roots and value.kind in (Kind.UNKNOWN, Kind.NDARRAY, Kind.TENSOR):
            value = value.but(roots=frozenset((key,)), vector=value.vector)  # an identity, so aliases of self.x can be followed
        if key:
            self.state[key] = value
            self.emit(Bind, target, name=key, value=value, expr=expr)
        owner_value = self.ev(target.value) if owner else UNKNOWN
        self.emit(Store, target, container=owner or code_of(target.value), container_value=owner_value, value=value, how="setattr", value_node=expr)

    def assign_item(self, target: cst.Subscript, value: Value, expr: cst.BaseExpression | None) -> None:
        self.state.pop(item_key(target) or ".", None)  # what a type test said of the old entry
        base = self.ev(target.value)
        if base.kind is Kind.TENSOR and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) and isinstance(target.slice[0].slice.value, cst.SimpleString):
            base = base.but(kind=Kind.DICT)  # `out["pair"] = ...`: a mapping (a model output), not a tensor
        for element in target.slice:
            if isinstance(element.slice, cst.Index):
                self.ev(element.slice.value)
        if base.kind is Kind.TENSOR and self._puts_back(target, expr):
            base = base.but(kind=Kind.LIST)  # `h = hs[-1]` ... `hs[-1] = h`: a no-op on a tensor, so `hs` is a list of them
        if base.kind in (Kind.TENSOR, Kind.NDARRAY):
            self.emit(Write, target, target=base, target_node=target.value, op="[...] =", source=value)
        elif base.kind in (Kind.DICT, Kind.LIST, Kind.STATE_DICT, Kind.UNKNOWN):
            self.emit(Store, target, container=dotted(target.value) or code_of(target.value), container_value=base, value=value, how="setitem", value_node=expr)

    def _puts_back(self, target: cst.Subscript, expr: cst.BaseExpression | None) -> bool:
        """The value assigned is a name last bound to this very item (`h = hs[-1]`, then
        `hs[-1] = h`): nobody writes a tensor's slice onto itself, so the container is a
        Python list or dict whose entry is put back (VGen's `encode_ms`)."""
        if not isinstance(expr, cst.Name):
            return False
        bind = next((e for e in reversed(self.flow.events) if isinstance(e, Bind) and e.name == expr.value), None)
        return bind is not None and bind.expr is not None and code_of(bind.expr) == code_of(target)

    def aug_assign(self, stmt: cst.AugAssign) -> None:
        added = self.ev(stmt.value)
        target = stmt.target
        op = code_of(stmt.operator).strip()
        if isinstance(target, cst.Subscript):
            base = self.ev(target.value)
            if base.kind in (Kind.TENSOR, Kind.NDARRAY):
                self.emit(Write, stmt, target=base, target_node=target.value, op=f"[...] {op}", source=added)
            return
        before = self.ev(target)
        key = dotted(target)
        if before.kind in (Kind.TENSOR, Kind.NDARRAY):
            self.emit(Write, stmt, target=before, target_node=target, op=op, source=added)
            after = before.but(grad=self.grad_of(before, added) if before.kind is Kind.TENSOR else Tri.NO)
        elif added.kind is Kind.TENSOR and before.kind is Kind.UNKNOWN and key in self.flow.params and not parameters.is_scalar(self, key) and not _times_ones(stmt):
            # `points += noise` on an argument: a tensor or array is changed in place (a number
            # would only be rebound, but numbers are not combined with tensors like this).
            as_tensor = before.but(kind=Kind.TENSOR)
            self.emit(Write, stmt, target=as_tensor, target_node=target, op=op, source=added)
            after = as_tensor.but(grad=self.grad_of(as_tensor, added))
        elif added.kind is Kind.TENSOR and before.kind in (Kind.SCALAR, Kind.UNKNOWN, Kind.NONE):
            after = self.tensor(stmt, added, origin=f"`{key or code_of(target)}`")
        elif before.kind is Kind.LIST and op == "+=":
            self.emit(Store, stmt, container=key, container_value=before, value=added.element or added, how="extend", value_node=stmt.value)
            after = before
        else:
            after = UNKNOWN if before.kind is Kind.UNKNOWN else before
        if key and added.kind is Kind.TENSOR:
            self.emit(Accumulate, stmt, name=key, value=added, value_node=stmt.value, before=before)
        if key:
            self.state[key] = after.but(fresh=False)


def _times_ones(stmt: cst.AugAssign) -> bool:
    """`level *= torch.ones_like(zp).to(torch.int8)`: multiplying by ones changes no value, so
    the one reason to write it is to make a number (or a smaller tensor) into a tensor of that
    shape; the name is rebound to the product, and nothing says the argument was a tensor."""
    if not isinstance(stmt.operator, cst.MultiplyAssign):
        return False
    value = stmt.value
    # `.to(dtype)`, `.int()`, `.cuda()`: still ones.
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in api.MAYBE_SELF_METHODS:
        value = value.func.value
    return isinstance(value, cst.Call) and dotted(value.func).rpartition(".")[2] in ("ones_like", "ones", "new_ones")
