#!/usr/bin/env python3
"""Prune the CUDA fat binary of an ELF shared library (.nv_fatbin section) for one GPU arch.

  prune_fatbin.py IN.so --dry-run                    # histogram of the (kind, arch) entries
  prune_fatbin.py IN.so --dump-ptx DIR [--arch 90]   # write each fatbin's PTX (<=arch, highest) as DIR/NNN.zst
  prune_fatbin.py IN.so OUT.so [--arch 90] [--cubins DIR] [--keep 0,1,5-9]

Fatbin layout: header {u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 entries_size}, then
entries {u16 kind (1 PTX, 2 ELF), u16 version, u32 header_size, u64 payload_size, u32 compressed_size,
u32, u16 minor, u16 major, u32 arch (offset 28), u32 name_off, u32 name_len, u64 flags (40),
u64, u64 uncompressed_size (56), ...} each followed by payload_size bytes.

Every fatbin is rewritten IN PLACE at its original offset (entries compacted, entries_size fixed, freed
tail zero-filled), so every pointer into the section (.nvFatBinSegment wrappers) stays valid.
Per fatbin NNN (index in section order): if --cubins DIR has NNN.cubin (an sm_<arch> cubin, e.g.
compiled offline with ptxas from the dumped PTX) and NNN is in --keep (default: all), the fatbin
becomes that one uncompressed ELF entry (zstd-compressed only when it would not fit); otherwise kept
are the ELF entries of exactly <arch> plus, if there is none, the highest PTX <= <arch>; with --cubins
and NNN not kept, the fatbin is emptied (a kernel of it then fails with "no kernel image").
"""
import collections, os, struct, subprocess, sys

MAGIC = 0xBA55ED50

def sections(buf):
    assert buf[:4] == b"\x7fELF" and buf[4] == 2, "64-bit ELF only"
    shoff, = struct.unpack_from("<Q", buf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", buf, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    return {buf[stroff + h[0]: buf.index(b"\0", stroff + h[0])].decode(): (h[4], h[5]) for h in hdrs}

def parse_entries(buf, start, end):
    ents, p = [], start
    while p < end:
        kind, _v, hsz, psz = struct.unpack_from("<HHIQ", buf, p)
        arch, = struct.unpack_from("<I", buf, p + 28)
        if kind not in (1, 2) or hsz < 32 or p + hsz + psz > end:
            raise ValueError(f"bad entry at {p:#x}: kind={kind} hsz={hsz} psz={psz}")
        ents.append((p, kind, arch, hsz + psz, hsz))
        p += hsz + psz
    return ents

def fatbins(buf, off, size):
    p, end = off, off + size
    while p < end:
        magic, _ver, hsz, esz = struct.unpack_from("<IHHQ", buf, p)
        if magic != MAGIC:
            if any(buf[p:p + 8]):
                raise ValueError(f"unexpected bytes at {p:#x}")
            p += 8
            continue
        yield p, hsz, esz
        p += hsz + esz

def elf_entry(cubin, arch, room):
    pad = lambda n: (n + 7) & ~7
    # uncompressed, as `fatbinary --compress=false --image3=kind=elf,sm=90` writes it
    hdr = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, pad(len(cubin)), 0, 0, 8, 1, arch, 0, 0, 0x11, 0, 0)
    if 64 + pad(len(cubin)) <= room:
        return hdr + cubin + bytes(pad(len(cubin)) - len(cubin))
    # zstd frame with the content size and no checksum, like nvcc's own compressed entries
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".cubin") as t:
        t.write(cubin); t.flush()
        z = subprocess.run(["zstd", "--ultra", "-22", "--no-check", "-q", "-c", t.name],
                           stdout=subprocess.PIPE, check=True).stdout
    hdr = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, pad(len(z)), len(z), 0, 8, 1, arch, 0, 0, 0x8011, 0, len(cubin))
    if 64 + pad(len(z)) > room:
        raise ValueError("cubin does not fit even zstd-compressed")
    print(f"  (zstd-compressed entry: {len(cubin)} -> {len(z)} bytes)")
    return hdr + z + bytes(pad(len(z)) - len(z))

def parse_list(s):
    out = set()
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-"); out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out

def main():
    a = sys.argv[1:]
    def opt(name, default=None):
        if name in a:
            i = a.index(name); v = a[i + 1]; del a[i:i + 2]; return v
        return default
    dry = "--dry-run" in a
    if dry: a.remove("--dry-run")
    want = int(opt("--arch", "90"))
    cubdir = opt("--cubins")
    keep = opt("--keep")
    keep = parse_list(keep) if keep else None
    dump = opt("--dump-ptx")
    src, dst = a[0], (a[1] if len(a) > 1 else None)
    buf = bytearray(open(src, "rb").read())
    secs = sections(buf)
    print("fatbin-related sections:", {k: hex(v[1]) for k, v in secs.items() if "nv" in k.lower() or "fatbin" in k.lower()})
    off, size = secs[".nv_fatbin"]
    hist = collections.Counter()
    stats = collections.Counter()
    freed = 0
    for idx, (p, hsz, esz) in enumerate(fatbins(buf, off, size)):
        ents = parse_entries(buf, p + hsz, p + hsz + esz)
        for e in ents:
            hist[("ELF" if e[1] == 2 else "PTX", e[2])] += 1
        ptx = [e for e in ents if e[1] == 1 and e[2] <= want]
        if dump:
            os.makedirs(dump, exist_ok=True)
            if ptx:
                q, _, _, _, h = max(ptx, key=lambda e: e[2])
                csz, = struct.unpack_from("<I", buf, q + 16)
                open(os.path.join(dump, f"{idx:03d}.zst"), "wb").write(buf[q + h:q + h + csz])
            continue
        cub = os.path.join(cubdir, f"{idx:03d}.cubin") if cubdir else None
        if cub and os.path.exists(cub) and (keep is None or idx in keep):
            blob = elf_entry(open(cub, "rb").read(), want, esz)
            stats["offline sm_%d cubin" % want] += 1
        else:
            kept = [e for e in ents if e[1] == 2 and e[2] == want]
            if kept:
                stats["own sm_%d ELF" % want] += 1
            elif cubdir:
                stats["emptied"] += 1
            elif ptx:
                kept = [max(ptx, key=lambda e: e[2])]
                stats["PTX only"] += 1
            else:
                kept = ents
                stats["untouched (no usable entry)"] += 1
            blob = b"".join(bytes(buf[e[0]:e[0] + e[3]]) for e in kept)
        q = p + hsz
        buf[q:q + esz] = blob + bytes(esz - len(blob))
        struct.pack_into("<Q", buf, p + 8, len(blob))
        freed += esz - len(blob)
        stats["fatbins"] += 1
    print("entries by (kind, arch):", ", ".join(f"{k} sm_{r}: {c}" for (k, r), c in sorted(hist.items(), key=lambda x: (x[0][1], x[0][0]))))
    if not dump:
        print("fatbins:", dict(stats), f"bytes zeroed: {freed} of {size}")
    if dst and not dry and not dump:
        open(dst, "wb").write(buf)
        print("wrote", dst)

if __name__ == "__main__":
    main()
