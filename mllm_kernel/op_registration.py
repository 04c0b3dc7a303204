"""``register_op``: one declaration per op gives everything an op of ``mllm_kernel.ops`` is.

An op is declared once, as a typed prototype (its signature and docstring; the body is never
run) with the kernel of each device::

    @register_op(kernels={"cpu": cpu.rmsnorm, "cuda": cuda.rmsnorm}, fake=lambda input, weight, eps: ...,
                 out=True)
    def rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
        \"\"\"RMSNorm over the last dimension.\"\"\"

and the declaration gives:
- the eager function (what ``register_op`` returns): it runs the kernel of its dispatch
  tensor's device directly, with no custom-op dispatch cost;
- ``torch.ops.mllm_kernel.<op>``, a PyTorch custom op with the fake (meta) function and the
  mutated arguments, which the eager function calls instead while ``torch.compile`` traces, so
  compiled graphs have no breaks;
- arrays of other frameworks (NumPy, CuPy, JAX) accepted through DLPack (``interop``);
- the refusal of inputs that require grad (the kernels have no backward).

The eager function is generated from the prototype's signature (as ``dataclasses`` generates
``__init__``), so its hot path is the few lines a hand-written one would have: an isinstance
check, two flag checks, a device test and the call. Each device kernel takes the op's parameters
positionally, in the op's order (then ``out`` for ops declared with ``out=True``); device knobs
such as ``enable_pdl`` come after, keyword-only, and keep their defaults here.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from mllm_kernel.interop import call_with_arrays

NAMESPACE = "mllm_kernel"
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class OpRecord:
    """What one declaration registered: the eager function, the custom op and the kernels."""

    name: str
    eager: Callable
    custom: Callable
    kernels: dict[str, Callable]
    mutates: tuple[str, ...]


#: Every op registered in this process, by name.
REGISTERED_OPS: dict[str, OpRecord] = {}


def refuse_grad(op: str) -> None:
    """The kernels have no backward: the error for an input that requires grad in grad mode."""
    raise RuntimeError(f"{op}: mllm-kernel ops do not support autograd, and an input requires grad; "
                       "run under torch.no_grad() or torch.inference_mode(), or detach it")


def _no_backward(op: str):
    def backward(ctx, *grads):
        raise RuntimeError(f"{op}: mllm-kernel ops have no backward; run them under torch.no_grad() or "
                           "torch.inference_mode(), or detach their inputs")

    return backward


def _missing_kernel(op: str, device: str) -> Callable:
    def missing(*args, **kwargs):
        raise NotImplementedError(f"{op}: mllm-kernel has no {device} kernel for this op yet")

    return missing


def _other_device(op: str, tensor: object):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a torch.Tensor, got {type(tensor).__name__}")
    raise ValueError(f"{op}: no kernels for device {tensor.device} (supported: {', '.join(DEVICES)})")


def _into(out: Tensor | None, result: Tensor) -> Tensor:
    """``result``, or ``out`` filled with it when the caller gave one (the traced path)."""
    if out is None:
        return result
    out.copy_(result)
    return out


def _into_exact(op: str, name: str, out: Tensor | None, result: Tensor) -> Tensor:
    """As ``_into`` for an op's own output parameter: ``out`` must match ``result`` exactly (the
    kernel, called eagerly, checks it the same way), so tracing neither casts nor broadcasts."""
    if out is None:
        return result
    if out.shape != result.shape or out.dtype != result.dtype or out.device != result.device:
        raise ValueError(f"{op}: {name}: must be {list(result.shape)} of {result.dtype} on {result.device}, got "
                         f"{list(out.shape)} of {out.dtype} on {out.device}")
    out.copy_(result)
    return out


def _fresh(result: tuple, inputs: tuple) -> tuple:
    """A custom op may not return one of its inputs: such a result is handed back as a copy."""
    return tuple(r.clone() if any(r is i for i in inputs) else r for r in result)


def _with_defaults(fake: Callable, signature: inspect.Signature) -> Callable:
    """``fake`` called with every argument, keyword-only ones by name: PyTorch passes a fake
    only those the caller gave."""

    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return fake(*bound.args, **bound.kwargs)

    return call


def _tensor_kind(annotation: object) -> str | None:
    """"tensor" for ``Tensor``, "optional" for ``Tensor | None``, else None."""
    if annotation is Tensor:
        return "tensor"
    args = typing.get_args(annotation)
    if Tensor in args and type(None) in args and len(args) == 2:
        return "optional"
    return None


def _generate(name: str, source: str, namespace: dict) -> Callable:
    exec(compile(source, f"<mllm_kernel op {name}>", "exec"), namespace)  # noqa: S102 - our own template
    return namespace[name]


def register_op(
    *,
    kernels: dict[str, Callable],
    fake: Callable | None = None,
    mutates: tuple[str, ...] = (),
    out: bool | str = False,
    dispatch: str | None = None,
) -> Callable[[Callable], Callable]:
    """Declares the op whose prototype it decorates and returns its eager function.

    ``kernels`` maps "cpu"/"cuda" to the device's kernel (a device left out raises
    NotImplementedError there); ``fake`` gives the outputs' shapes, dtypes and strides from the
    op's arguments (ops that only mutate need none); ``mutates`` names the arguments written in
    place; ``out=True`` adds an ``out: Tensor | None = None`` parameter (filled and returned), and
    ``out="c"`` makes the op's own optional parameter ``c`` that output (the kernel fills and
    returns it when given; traced calls pass None to the custom op and copy into c after);
    ``dispatch`` names the tensor whose device picks the kernel (the first tensor parameter
    unless given).
    """
    unknown = set(kernels) - set(DEVICES)
    if unknown:
        raise ValueError(f"register_op: kernels for unknown devices {sorted(unknown)} (devices: {DEVICES})")

    def decorate(prototype: Callable) -> Callable:
        name = prototype.__name__
        if name in REGISTERED_OPS:
            raise ValueError(f"register_op: an op named {name!r} is registered already")
        signature = inspect.signature(prototype, eval_str=True)
        params = list(signature.parameters.values())
        names = [p.name for p in params]
        kinds = {p.name: _tensor_kind(p.annotation) for p in params}
        tensors = [n for n in names if kinds[n]]
        target = dispatch or (tensors[0] if tensors else None)
        if target not in tensors:
            raise ValueError(f"register_op({name}): dispatch must name a tensor parameter, got {target!r}")
        for m in mutates:
            if m not in tensors:
                raise ValueError(f"register_op({name}): mutates names {m!r}, which is not a tensor parameter")
        if isinstance(out, str) and kinds.get(out) != "optional":
            raise ValueError(f"register_op({name}): out names {out!r}, which is not an optional tensor parameter")

        namespace: dict = {
            "Tensor": Tensor, "_compiling": torch.compiler.is_compiling, "_grad_enabled": torch.is_grad_enabled,
            "_arrays": call_with_arrays, "_into": _into, "_into_exact": _into_exact, "_fresh": _fresh, "_refuse_grad": refuse_grad,
            "_other_device": _other_device, "_mutates": tuple(mutates),
            "_cpu": kernels.get("cpu") or _missing_kernel(name, "cpu"),
            "_cuda": kernels.get("cuda") or _missing_kernel(name, "cuda"),
        }
        declared = []
        for p in params:
            if p.kind is inspect.Parameter.KEYWORD_ONLY and "*" not in declared:
                declared.append("*")
            if p.default is inspect.Parameter.empty:
                declared.append(p.name)
            else:
                namespace[f"_default_{p.name}"] = p.default
                declared.append(f"{p.name}=_default_{p.name}")
        # Keyword-only parameters are passed on by name.
        args = ", ".join(f"{p.name}={p.name}" if p.kind is inspect.Parameter.KEYWORD_ONLY else p.name for p in params)
        returns_tuple = typing.get_origin(signature.return_annotation) is tuple

        out_param = out if isinstance(out, str) else None
        # The custom op: what torch.compile's graphs call. An op whose output is one of its own
        # parameters (out="c") ignores it there and returns a new tensor (a custom op may neither
        # write an undeclared input nor return one); the eager function copies it into c.
        custom_args = args if out_param is None else ", ".join(
            (f"{p.name}=" if p.kind is inspect.Parameter.KEYWORD_ONLY else "") + ("None" if p.name == out_param else p.name)
            for p in params)
        call = f"(_cuda if {target}.is_cuda else _cpu)({custom_args})"
        if returns_tuple:
            call = f"_fresh({call}, ({', '.join(tensors)},))"
        impl = _generate(name, f"def {name}({', '.join(declared)}):\n    return {call}\n", namespace)
        impl.__signature__ = signature
        custom = torch.library.custom_op(f"{NAMESPACE}::{name}", impl, mutates_args=tuple(mutates))
        if fake is not None or mutates:
            custom.register_fake(_with_defaults(fake, signature) if fake else (lambda *args, **kwargs: None))
        if not mutates:  # PyTorch takes autograd formulas for functional ops only
            custom.register_autograd(_no_backward(name), setup_context=lambda ctx, inputs, output: None)
        namespace["_custom"] = getattr(getattr(torch.ops, NAMESPACE), name)

        # The eager function.
        grad = " or ".join(f"{n}.requires_grad" if kinds[n] == "tensor" else f"({n} is not None and {n}.requires_grad)"
                           for n in tensors)
        extra_out = bool(out) and out_param is None
        keywords = ", ".join(f"{n}={n}" for n in names + (["out"] if extra_out else []))
        kernel_args = args + ((", out=out" if "*" in declared else ", out") if extra_out else "")
        if out_param is not None:
            traced = f"_into_exact({name!r}, {out_param!r}, {out_param}, _custom({custom_args}))"
        else:
            traced = f"_into(out, _custom({args}))" if out else f"_custom({args})"
        source = (
            f"def {name}({', '.join(declared + (['out=None'] if extra_out else []))}):\n"
            f"    if not isinstance({names[0]}, Tensor):\n"
            f"        return _arrays({name}, _mutates, {keywords})\n"
            f"    if _compiling():\n"
            f"        return {traced}\n"
            f"    if _grad_enabled() and ({grad}):\n"
            f"        _refuse_grad({name!r})\n"
            f"    if {target}.is_cuda:\n"
            f"        return _cuda({kernel_args})\n"
            f"    if {target}.is_cpu:\n"
            f"        return _cpu({kernel_args})\n"
            f"    return _other_device({name!r}, {target})\n"
        )
        eager = _generate(name, source, namespace)
        eager.__doc__ = prototype.__doc__
        eager.__module__ = prototype.__module__
        eager.__qualname__ = prototype.__qualname__
        annotations = dict(prototype.__annotations__)
        if extra_out:
            annotations["out"] = "Tensor | None"
        eager.__annotations__ = annotations
        REGISTERED_OPS[name] = OpRecord(name, eager, custom, dict(kernels), tuple(mutates))
        return eager

    return decorate
