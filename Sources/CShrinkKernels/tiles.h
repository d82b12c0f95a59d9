// The walk over register tiles shared by the panel kernels.
#ifndef SHRINK_TILES_H
#define SHRINK_TILES_H

/// Calls TILE(MR, NP) with `panel` and `m` set, over panels [begin, end) and rows [0, rows):
/// pairs of panels (NP = 2, sharing each activation broadcast) when there are at least 4 rows,
/// then single panels; rows in tiles of TOP (6 or 4), 4, 2 and 1. Below 4 rows a product streams
/// its weight, and one panel at a time (one sequential stream) measured 5–25 % faster.
#define SHRINK_FOR_EACH_TILE(rows, begin, end, TOP, TILE)                      \
    do {                                                                       \
        size_t panel = (begin);                                                \
        if ((rows) >= 4)                                                       \
            for (; panel + 2 <= (end); panel += 2) {                           \
                size_t m = 0;                                                  \
                for (; m + (TOP) <= (rows); m += (TOP)) TILE(TOP, 2);          \
                for (; m + 4 <= (rows); m += 4) TILE(4, 2);                    \
                for (; m + 2 <= (rows); m += 2) TILE(2, 2);                    \
                for (; m < (rows); m++) TILE(1, 2);                            \
            }                                                                  \
        for (; panel < (end); panel++) {                                       \
            size_t m = 0;                                                      \
            for (; m + (TOP) <= (rows); m += (TOP)) TILE(TOP, 1);              \
            for (; m + 4 <= (rows); m += 4) TILE(4, 1);                        \
            for (; m + 2 <= (rows); m += 2) TILE(2, 1);                        \
            for (; m < (rows); m++) TILE(1, 1);                                \
        }                                                                      \
    } while (0)

#endif
