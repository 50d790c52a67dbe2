/* fp16 <-> fp32 for the decoding kernels' portable paths and for packing weights: IEEE half precision, rounding
 * to the nearest value (ties to even) as the F16C instructions and torch's conversion do. */
#ifndef REEF_DECODE_HALF_H
#define REEF_DECODE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exponent = 113;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint16_t float_to_half(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;         /* NaN stays NaN */
    if (magnitude >= 0x47800000u) return sign | 0x7c00u;        /* 65536 and up, infinity: infinity */
    if (magnitude >= 0x38800000u) {                             /* a normal half (65520 and up round to infinity) */
        uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
        return sign | (uint16_t)((rounded >> 13) - (112u << 10));
    }
    if (magnitude < 0x33000000u) return sign;                   /* at most half the smallest subnormal: zero */
    uint32_t exponent = magnitude >> 23, mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent, kept = mantissa >> shift, rest = mantissa & ((1u << shift) - 1u);
    uint32_t half_way = 1u << (shift - 1u);
    if (rest > half_way || (rest == half_way && (kept & 1u))) kept++;
    return sign | (uint16_t)kept;                               /* a subnormal, or rounded up to the smallest normal */
}

#endif
