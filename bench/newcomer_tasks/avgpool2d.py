import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void avgpool2x2(const float* x, float* y, int NC, int H, int W) {
    int OH = H / 2, OW = W / 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= NC * OH * OW) return;
    int ow = i % OW;
    int oh = (i / OW) % OH;
    int nc = i / (OW * OH);
    const float* p = x + nc * H * W;
    float s = p[(2 * oh) * W + 2 * ow] + p[(2 * oh) * W + 2 * ow + 1]
            + p[(2 * oh + 1) * W + 2 * ow] + p[(2 * oh + 1) * W + 2 * ow + 1];
    y[i] = s * 0.25f;
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    nc, h, w = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2].reshape(nc, h // 2, 2, w // 2, 2)
    return {"y": x.mean(axis=(2, 4)).astype(np.float32)}
TASK = task("avgpool2d", {"NC": 1024, "H": 256, "W": 256}, [{"NC": 1, "H": 2, "W": 2}, {"NC": 3, "H": 10,
            "W": 34}, {"NC": 5, "H": 7, "W": 9}],
            [T("x", ("NC", "H", "W"))], [T("y", ("NC", "H // 2", "W // 2"))], ref, SRC, "avgpool2x2",
            ["cdiv(NC * (H / 2) * (W / 2), 256)"], [256], ["x", "y", "NC", "H", "W"])
