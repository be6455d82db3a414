"""Writes mp_font_metrics.py: the advance widths (per 1000 units of the em) of DejaVu Sans and DejaVu
Sans Bold for the characters the diagrams use, read from the fonts' own hmtx and cmap tables.

    python docs/_diagrams/extract_metrics.py > docs/_diagrams/mp_font_metrics.py

Run it only to add a character (the fonts: Debian's fonts-dejavu-core); the generator and the
tests read the committed table, so neither needs the fonts."""
import struct, sys

def widths(path, chars):
    data = open(path, "rb").read()
    num = struct.unpack(">H", data[4:6])[0]
    tables = {}
    for i in range(num):
        tag, _, off, length = struct.unpack(">4sIII", data[12 + 16 * i: 28 + 16 * i])
        tables[tag.decode()] = off
    head = tables["head"]; units = struct.unpack(">H", data[head + 18: head + 20])[0]
    hhea = tables["hhea"]; nh = struct.unpack(">H", data[hhea + 34: hhea + 36])[0]
    hmtx = tables["hmtx"]
    cmap = tables["cmap"]
    n = struct.unpack(">H", data[cmap + 2: cmap + 4])[0]
    sub = None
    for i in range(n):
        pid, eid, off = struct.unpack(">HHI", data[cmap + 4 + 8 * i: cmap + 12 + 8 * i])
        if pid == 3 and eid == 1:
            sub = cmap + off
    assert struct.unpack(">H", data[sub: sub + 2])[0] == 4
    segx2 = struct.unpack(">H", data[sub + 6: sub + 8])[0]; seg = segx2 // 2
    ends = struct.unpack(f">{seg}H", data[sub + 14: sub + 14 + segx2])
    starts = struct.unpack(f">{seg}H", data[sub + 16 + segx2: sub + 16 + 2 * segx2])
    deltas = struct.unpack(f">{seg}h", data[sub + 16 + 2 * segx2: sub + 16 + 3 * segx2])
    ro_off = sub + 16 + 3 * segx2
    ros = struct.unpack(f">{seg}H", data[ro_off: ro_off + segx2])
    def glyph(c):
        for i in range(seg):
            if starts[i] <= c <= ends[i]:
                if ros[i] == 0:
                    return (c + deltas[i]) & 0xFFFF
                addr = ro_off + 2 * i + ros[i] + 2 * (c - starts[i])
                g = struct.unpack(">H", data[addr: addr + 2])[0]
                return (g + deltas[i]) & 0xFFFF if g else 0
        return 0
    out = {}
    for ch in chars:
        g = glyph(ord(ch)); g = min(g, nh - 1)
        adv = struct.unpack(">H", data[hmtx + 4 * g: hmtx + 4 * g + 2])[0]
        out[ch] = round(adv * 1000 / units)
    return out

print('"""Advance widths of DejaVu Sans (REGULAR) and DejaVu Sans Bold (BOLD), per 1000 units of the em;')
print("MONO: DejaVu Sans Mono's one width.  Written by extract_metrics.py from the fonts' hmtx tables.")
print('"""')
print()
print(f"MONO = {widths('/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf', 'm')['m']}")
print()
chars = "".join(chr(c) for c in range(32, 127)) + "…→←↔⇄–—×≥≤·•✓✗"
for name, path in (("REGULAR", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
                   ("BOLD", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")):
    w = widths(path, chars)
    print(f"{name} = {{")
    items = list(w.items())
    for i in range(0, len(items), 8):
        print("    " + " ".join(f"{k!r}: {v}," for k, v in items[i:i + 8]))
    print("}")
