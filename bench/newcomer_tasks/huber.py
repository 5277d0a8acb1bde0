import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void zero(float* loss) { *loss = 0.0f; }
extern "C" __global__ void huber_loss(const float* pred, const float* target, float* loss, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float d = pred[i] - target[i];
        float ad = fabsf(d);
        float l = ad < 1.0f ? 0.5f * d * d : ad - 0.5f;
        atomicAdd(loss, l / n);
    }
}
'''
def ref(i, s):
    d = i["p"].astype(np.float64) - i["t"].astype(np.float64)
    ad = np.abs(d)
    return {"loss": np.array([np.where(ad < 1, 0.5 * d * d, ad - 0.5).mean()], dtype=np.float32)}
TASK = task("huber", {"n": 1 << 26}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [T("p", ("n",)), T("t", ("n",))], [T("loss", (1,))], ref, SRC, "huber_loss",
            ["cdiv(n, 256)"], [256], ["p", "t", "loss", "n"],
            launches=[{"kernel": "zero", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["loss"]},
                      {"kernel": "huber_loss", "grid": ["cdiv(n, 256)"], "block": [256], "shared_bytes": 0,
                       "args": ["p", "t", "loss", "n"]}])
