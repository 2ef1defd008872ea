// recurrent.glsl — arithmetic the recurrent shaders (gated_delta.comp, ssm_scan.comp) share with the CPU's
// kernels (cpu/recurrent.cpp): its reduction of 8 lanes and its softplus.

// The CPU's reduction of its 8 lanes (element i summed into lane i % 8).
float lanes_sum(float acc[8]) {
    precise float r = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return r;
}

// log(1 + y) for y >= 0 without losing a small y to the rounding of 1 + y (GLSL has no log1p).
float log1p_pos(float y) {
    precise float u = 1.0 + y;
    precise float d = u - 1.0;
    return d == 0.0 ? y : log(u) * (y / d);
}

// log(1 + e^z), z itself beyond 20 (the CPU's softplus).
float softplus(float z) { return z > 20.0 ? z : log1p_pos(exp(z)); }
