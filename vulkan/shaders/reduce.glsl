// reduce.glsl — a workgroup sum over REDUCE_N invocations through shared memory (no subgroup
// operations: they are optional, and this runs on any Vulkan 1.0 device).
shared float red_s[REDUCE_N];
float wg_sum(float v) {
    uint i = gl_LocalInvocationID.x;
    red_s[i] = v;
    barrier();
    [[unroll]] for (uint s = REDUCE_N / 2u; s > 0u; s >>= 1u) {
        if (i < s) red_s[i] += red_s[i + s];
        barrier();
    }
    float r = red_s[0];
    barrier();
    return r;
}
float wg_max(float v) {
    uint i = gl_LocalInvocationID.x;
    red_s[i] = v;
    barrier();
    [[unroll]] for (uint s = REDUCE_N / 2u; s > 0u; s >>= 1u) {
        if (i < s) red_s[i] = max(red_s[i], red_s[i + s]);
        barrier();
    }
    float r = red_s[0];
    barrier();
    return r;
}
