import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void conv1d(const float* x, const float* w, float* y, int B, int Cin, int L,
                                        int Cout, int K, int OL) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int co = blockIdx.y;
    int b = blockIdx.z;
    if (o < OL) {
        float acc = 0.0f;
        for (int ci = 0; ci < Cin; ci++)
            for (int k = 0; k < K; k++)
                acc += x[(b * Cin + ci) * L + o + k] * w[(co * Cin + ci) * K + k];
        y[(b * Cout + co) * OL + o] = acc;
    }
}
'''
def ref(i, s):
    x, w = i["x"].astype(np.float64), i["w"].astype(np.float64)
    K, OL = s["K"], s["OL"]
    cols = np.stack([x[:, :, k:k + OL] for k in range(K)], axis=-1)  # B, Cin, OL, K
    return {"y": np.einsum("bclk,dck->bdl", cols, w).astype(np.float32)}
TASK = task("conv1d", {"B": 16, "Cin": 64, "L": 4098, "Cout": 128, "K": 3, "OL": 4096},
            [{"B": 1, "Cin": 1, "L": 3, "Cout": 1, "K": 3, "OL": 1}, {"B": 2, "Cin": 3, "L": 12, "Cout": 5,
            "K": 3, "OL": 10}],
            [T("x", ("B", "Cin", "L")), T("w", ("Cout", "Cin", "K"))], [T("y", ("B", "Cout", "OL"))], ref,
            SRC, "conv1d",
            ["cdiv(OL, 128)", "Cout", "B"], [128], ["x", "w", "y", "B", "Cin", "L", "Cout", "K", "OL"],
            flops=lambda s: 2.0 * s["B"] * s["Cout"] * s["OL"] * s["Cin"] * s["K"])
