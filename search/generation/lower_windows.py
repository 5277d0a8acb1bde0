"""Lowering a traced module's convolution or pooling to a plain kernel (lowering.py
dispatches): a thread per output, loops over its window, as a newcomer writes it.

- `Conv1d`/`Conv2d`/`Conv3d` (stride, padding, dilation, groups, bias; zero padding):
  out[n][oc][o...] = bias[oc] + sum over the group's input channels and the taps of
  x[n][g * ICG + ic][o * s - p + k * d] * w[oc][ic][k], taps outside the input skipped;
- `MaxPool1d/2d/3d` (padding as -inf) and `AvgPool1d/2d/3d` (padding counted as zeros,
  torch's default `count_include_pad`), floor mode.

The output's sizes are the task's (the importer fitted them to the module's own
constants); the window's numbers come from the module. Anything else (ceil mode, reflect
padding, indices returned) is NotWindow.

- `ConvTranspose1d/2d/3d` (stride, padding, dilation, groups, bias; output padding only
  sizes the output, which is the task's): the gather a transposed convolution is, each
  output summing the inputs whose scattered taps land on it (`_transposed`).
"""

from __future__ import annotations

_CONVS = {"Conv1d": 1, "Conv2d": 2, "Conv3d": 3}
_TRANSPOSED = {"ConvTranspose1d": 1, "ConvTranspose2d": 2, "ConvTranspose3d": 3}
_POOLS = {"MaxPool1d": 1, "MaxPool2d": 2, "MaxPool3d": 3, "AvgPool1d": 1, "AvgPool2d": 2, "AvgPool3d": 3}


class NotWindow(ValueError):
    pass


def lower_window(nodes: list[dict], task, kernel_name: str) -> tuple[str, dict, str]:
    """(source, plan, what it computes) or NotWindow."""
    calls = [n for n in nodes if n["op"] in ("call_function", "call_method", "call_module")]
    if len(calls) != 1 or calls[0]["op"] != "call_module" or \
            calls[0]["target"] not in (*_CONVS, *_TRANSPOSED, *_POOLS):
        raise NotWindow("not one convolution or pooling module")
    node = calls[0]
    spatial = (_CONVS | _TRANSPOSED | _POOLS)[node["target"]]
    a = node["attributes"]
    if len(task.inputs) != 1 or len(task.outputs) != 1 or task.inputs[0]["dtype"] != "float32":
        raise NotWindow("not one float32 tensor in and one out")
    x, out = task.inputs[0], task.outputs[0]
    if len(x["shape"]) != spatial + 2 or len(out["shape"]) != spatial + 2:
        raise NotWindow(f"a {node['target']} of a tensor of {len(x['shape'])} dimensions (no batch?)")
    size = _tuple(a.get("kernel_size"), spatial, "kernel_size")
    stride = _tuple(a.get("stride") or a.get("kernel_size"), spatial, "stride")
    padding = _tuple(a.get("padding", 0), spatial, "padding")
    dilation = _tuple(a.get("dilation", 1), spatial, "dilation")
    if a.get("ceil_mode") or a.get("return_indices") or a.get("padding_mode", "zeros") != "zeros":
        raise NotWindow("ceil mode, returned indices or a padding mode other than zeros")
    if a.get("divisor_override") is not None:
        raise NotWindow("an average pool with a divisor override")
    ins = [str(d) for d in x["shape"][2:]]
    outs = [str(d) for d in out["shape"][2:]]
    lines = ["long long rest = t;"]
    for i in reversed(range(spatial)):
        lines.append(f"int o{i} = (int)(rest % O{i});\n        rest /= O{i};")
    lines.append("int c = (int)(rest % C_OUT);\n        int n = (int)(rest / C_OUT);")
    loops, close, inside = [], [], []
    for i in range(spatial):
        loops.append(f"for (int k{i} = 0; k{i} < {size[i]}; k{i}++) {{\n"
                     f"            int i{i} = o{i} * {stride[i]} - {padding[i]} + k{i} * {dilation[i]};")
        inside.append(f"i{i} >= 0 && i{i} < I{i}")
        close.append("}")
    spatial_index = "".join(f") * I{i} + i{i}" for i in range(spatial))  # ((base) * I0 + i0) * I1 + i1
    params = [f"const float* {x['name']}"]
    args = [x["name"]]
    if node["target"] in _TRANSPOSED:
        loops, inside = _gathers(spatial, size, stride, padding, dilation)
        body, what = _transposed(node, task, spatial, spatial_index, loops, inside, params, args, size)
    elif node["target"] in _CONVS:
        body, what = _convolution(node, task, spatial, spatial_index, loops, inside, close, params, args,
                                  size)
    else:
        body, what = _pool(node, (x["name"], out["name"]), spatial_index, loops, inside, close, size, spatial)
    params += [f"float* {out['name']}", "long long TOTAL", "int C_IN", "int C_OUT",
               *(f"int I{i}" for i in range(spatial)), *(f"int O{i}" for i in range(spatial))]
    total = " * ".join(f"({d})" for d in out["shape"])
    args += [out["name"], total, str(x["shape"][1]), str(out["shape"][1]), *ins, *outs]
    source = f"""// The module's {node['target']}, a thread per output (lowered from torch.fx).
extern "C" __global__ void {kernel_name}({", ".join(params)}) {{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < TOTAL) {{
        {chr(10).join("        " + line if j else line for j, line in enumerate(lines))}
{body}
    }}
}}
"""
    plan = {"launches": [{"kernel": kernel_name, "grid": [f"cdiv({total}, BLOCK)"], "block": ["BLOCK"],
                          "shared_bytes": 0, "args": args}], "scratch": [], "tunables": {"BLOCK": 256}}
    return source, plan, what


def _convolution(node, task, spatial, spatial_index, loops, inside, close, params, args, size):
    """The group structure comes from the weight's shape, (C_OUT, C_IN / groups, taps...):
    its second dimension is the channels a group reads (ICG), as a size of the task, so a
    module whose groups follow its channels (a depthwise one: groups = in_channels) is
    lowered right at every size, not only at the size it was traced at. One group (ICG is
    C_IN) reads every channel; one channel a group (ICG is 1, a depthwise convolution)
    has no channel loop."""
    weight, bias, shape = _weight_and_bias(node, task, spatial, "convolution")
    params.append(f"const float* {weight}")
    args.append(weight)
    if bias:
        params.append(f"const float* {bias}")
        args.append(bias)
    taps = "".join(f") * {size[i]} + k{i}" for i in range(spatial))
    channels_in, channels_out, per_group = (str(d) for d in (task.inputs[0]["shape"][1],
                                                              task.outputs[0]["shape"][1], shape[1]))
    opened = "(" * spatial
    x = task.inputs[0]["name"]
    body = [f"        float acc = {f'{bias}[c]' if bias else '0.0f'};"]
    depth0 = 2
    if per_group == channels_in:  # one group
        body.append("        for (int ic = 0; ic < C_IN; ic++) {")
        depth0, channel, filter_ = 3, "(long long)n * C_IN + ic", "(long long)c * C_IN + ic"
    elif per_group == "1":  # a channel a group: depthwise (C_OUT / C_IN filters a channel)
        group = "c" if channels_out == channels_in else "c / (C_OUT / C_IN)"
        channel, filter_ = f"(long long)n * C_IN + {group}", "(long long)c"
    else:
        params.append("int ICG")
        args.append(per_group)
        body[:0] = ["        const int OCG = C_OUT / (C_IN / ICG);  // output channels a group",
                    "        const int g = c / OCG;"]
        body.append("        for (int ic = 0; ic < ICG; ic++) {")
        depth0, channel, filter_ = 3, "(long long)n * C_IN + g * ICG + ic", "(long long)c * ICG + ic"
    pad = "    " * (spatial + depth0)
    for depth, loop in enumerate(loops):
        body.append("    " * (depth + depth0) + loop.replace("\n", "\n" + "    " * (depth + depth0 - 2)))
    body.append(f"{pad}if ({' && '.join(inside)}) {{")
    body.append(f"{pad}    acc += {x}[{opened}({channel}){spatial_index}] *\n"
                f"{pad}           {weight}[{opened}({filter_}){taps}];")
    body.append(f"{pad}}}")
    for depth in reversed(range(len(close))):
        body.append("    " * (depth + depth0) + "}")
    if depth0 == 3:
        body.append("        }")
    body.append(f"        {task.outputs[0]['name']}[t] = acc;")
    groups = node["attributes"].get("groups", 1)
    what = f"{node['target']}, groups {groups} ({per_group} input channels a group){', bias' if bias else ''}"
    return "\n".join(body), what


def _gathers(spatial: int, size, stride, padding, dilation) -> tuple[list[str], list[str]]:
    """A transposed convolution's loops over the taps: the input position a tap reads
    is (o + p - k * d) / s, where that divides exactly and lies inside the input."""
    loops, inside = [], []
    for i in range(spatial):
        loops.append(f"for (int k{i} = 0; k{i} < {size[i]}; k{i}++) {{\n"
                     f"            int j{i} = o{i} + {padding[i]} - k{i} * {dilation[i]};\n"
                     f"            int i{i} = j{i} / {stride[i]};")
        inside.append(f"j{i} >= 0 && j{i} % {stride[i]} == 0 && i{i} < I{i}")
    return loops, inside


def _transposed(node, task, spatial, spatial_index, loops, inside, params, args, size):
    """`ConvTransposeNd` as the gather it is: out[n][oc][o] = bias[oc] + the sum over the
    group's input channels ic and the taps k with o = i * s - p + k * d of
    x[n][ic][i] * w[ic][oc in its group][k]. The weight is (C_IN, C_OUT / groups, taps...):
    its second dimension is the output channels a group writes (OCG), a size of the
    task, so the groups follow the channels at every size."""
    weight, bias, shape = _weight_and_bias(node, task, spatial, "transposed convolution")
    params += [f"const float* {weight}", *([f"const float* {bias}"] if bias else []), "int OCG"]
    args += [weight, *([bias] if bias else []), str(shape[1])]
    taps = "".join(f") * {size[i]} + k{i}" for i in range(spatial))
    opened = "(" * spatial
    x = task.inputs[0]["name"]
    body = [f"        float acc = {f'{bias}[c]' if bias else '0.0f'};"]
    if str(shape[1]) == str(task.outputs[0]["shape"][1]):  # one group: every input channel
        body.append("        for (int ic = 0; ic < C_IN; ic++) {")
        channel, filter_ = "(long long)n * C_IN + ic", "(long long)ic * OCG + c"
    else:
        body += ["        const int ICG = C_IN / (C_OUT / OCG);  // input channels a group",
                 "        const int g = c / OCG;",
                 "        for (int ic = 0; ic < ICG; ic++) {"]
        channel = "(long long)n * C_IN + g * ICG + ic"
        filter_ = "(long long)(g * ICG + ic) * OCG + (c - g * OCG)"
    pad = "    " * (spatial + 3)
    for depth, loop in enumerate(loops):
        body.append("    " * (depth + 3) + loop.replace("\n", "\n" + "    " * (depth + 1)))
    body.append(f"{pad}if ({' && '.join(inside)}) {{")
    body.append(f"{pad}    acc += {x}[{opened}({channel}){spatial_index}] *\n"
                f"{pad}           {weight}[{opened}({filter_}){taps}];")
    body.append(f"{pad}}}")
    for depth in reversed(range(spatial)):
        body.append("    " * (depth + 3) + "}")
    body.append("        }")
    body.append(f"        {task.outputs[0]['name']}[t] = acc;")
    groups = node["attributes"].get("groups", 1)
    what = f"{node['target']}, groups {groups} ({shape[1]} output channels a group){', bias' if bias else ''}"
    return "\n".join(body), what


def _pool(node, names, spatial_index, loops, inside, close, size, spatial):
    x, out = names
    is_max = node["target"].startswith("Max")
    pad = "    " * (spatial + 2)
    body = [f"        float acc = {'-INFINITY' if is_max else '0.0f'};"]
    for depth, loop in enumerate(loops):
        body.append("    " * (depth + 2) + loop.replace("\n", "\n" + "    " * (depth + 2 - 2)))
    update = "acc = fmaxf(acc, v);" if is_max else "acc += v;"
    body.append(f"{pad}if ({' && '.join(inside)}) {{")
    body.append(f"{pad}    float v = {x}[{'(' * spatial}((long long)n * C_IN + c){spatial_index}];")
    body.append(f"{pad}    {update}")
    body.append(f"{pad}}}")
    for depth in reversed(range(len(close))):
        body.append("    " * (depth + 2) + "}")
    count = " * ".join(str(s) for s in size)
    body.append(f"        {out}[t] = {'acc' if is_max else f'acc / (float)({count})'};")
    return "\n".join(body), node["target"]


def _weight_and_bias(node, task, spatial: int, what: str) -> tuple[str, str | None, list]:
    """(the weight's input name, the bias's or None, the weight's shape) of a convolution
    module, whose only parameters they must be."""
    held = node["attributes"].get("parameters", [])
    weight = _parameter(task, "weight")
    bias = _parameter(task, "bias") if "bias" in held else None
    if weight is None or ("bias" in held and bias is None) or len(task.weights) != 1 + (bias is not None):
        raise NotWindow(f"a {what} whose parameters are not its weight and bias")
    shape = next(w["shape"] for w in task.weights if w["name"] == weight)
    if len(shape) != spatial + 2:
        raise NotWindow(f"a weight of {len(shape)} dimensions for a {spatial}-D {what}")
    return weight, bias, shape


def _parameter(task, kind: str) -> str | None:
    found = [w["name"] for w in task.weights if str(w.get("parameter", "")).endswith(f".{kind}")]
    return found[0] if len(found) == 1 else None


def _tuple(value, spatial: int, what: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * spatial
    if isinstance(value, list) and len(value) == spatial and all(isinstance(v, int) for v in value):
        return list(value)
    raise NotWindow(f"a {what} of {value!r}")
