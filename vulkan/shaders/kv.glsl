// kv.glsl — reading and writing the paged K/V cache rows (core's row format, backend/kv_format.cpp):
// F16 rows of kv_width halves, Q8_0 rows of GGUF blocks (2-byte f16 scale, 32 signed bytes; 34 bytes,
// so blocks are not word-aligned) or Q4_0 rows of GGUF blocks (2-byte f16 scale, 16 bytes whose low
// nibbles are elements 0..15 and high nibbles 16..31, code c standing for c - 8; 18 bytes). Offsets here
// are in bytes from the start of the cache buffer.

uint cache_byte(bool v, uint off) {
    uint w = v ? vc[off >> 2] : kc[off >> 2];
    return (w >> (8u * (off & 3u))) & 0xffu;
}

// Element e of the row starting at byte `row`.
float kv_at(bool v, uint type, uint row, uint e) {
    if (type == T_F16) {
        uint off = row + 2u * e;
        uint w = v ? vc[off >> 2] : kc[off >> 2];
        return unpackHalf2x16((off & 2u) != 0u ? w >> 16 : w).x;
    }
    uint b = row + (e / 32u) * (type == T_Q4_0 ? 18u : 34u);
    uint sw = v ? vc[b >> 2] : kc[b >> 2];
    float d = unpackHalf2x16((b & 2u) != 0u ? sw >> 16 : sw).x;
    if (type == T_Q4_0) {
        uint o = e % 32u;
        int c = int((cache_byte(v, b + 2u + o % 16u) >> (o >= 16u ? 4u : 0u)) & 15u);
        return d * float(c - 8);
    }
    int q = bitfieldExtract(int(cache_byte(v, b + 2u + e % 32u)), 0, 8);
    return d * float(q);
}
