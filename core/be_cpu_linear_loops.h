/* be_cpu_linear_loops.h — one block of rows of the fused linear step for one element type
 * (be_cpu_linear.c includes it per dtype with T and SFX(name) defined). */

/* part[0] = sum r^2, part[1] = sum r, part[2 + j] = sum r x_j over rows [r0, r1), in double. */
static void SFX(lm_block)(const struct lm_job *j, int64_t r0, int64_t r1, double *part)
{
    const int64_t f = j->f;
    const double *w = j->w, b = w[f];
    /* sums in registers/stack, not in part, which neighbouring threads' blocks share lines with */
    double ss = 0, sr = 0, local[64] = {0}, *gx = f <= 64 ? local : part + 2;
    if (j->sx1 == (int64_t)sizeof(T) && f == 8) {
        /* The DC-taxi shape: 8 features, unit column stride (batch[:, 1:]). */
        double g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0;
        for (int64_t i = r0; i < r1; i++) {
            const T *xr = (const T *)(j->x + i * j->sx0);
            double x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3], x4 = xr[4], x5 = xr[5],
                   x6 = xr[6], x7 = xr[7];
            double p = ((x0 * w[0] + x1 * w[1]) + (x2 * w[2] + x3 * w[3])) +
                       ((x4 * w[4] + x5 * w[5]) + (x6 * w[6] + x7 * w[7]));
            double r = (p + b) - (double)*(const T *)(j->y + i * j->sy);
            ss += r * r;
            sr += r;
            g0 += r * x0, g1 += r * x1, g2 += r * x2, g3 += r * x3;
            g4 += r * x4, g5 += r * x5, g6 += r * x6, g7 += r * x7;
        }
        gx[0] = g0, gx[1] = g1, gx[2] = g2, gx[3] = g3;
        gx[4] = g4, gx[5] = g5, gx[6] = g6, gx[7] = g7;
    } else {
        const int64_t s1 = j->sx1 / (int64_t)sizeof(T);
        for (int64_t i = r0; i < r1; i++) {
            const T *xr = (const T *)(j->x + i * j->sx0);
            double p = 0;
            for (int64_t k = 0; k < f; k++)
                p += (double)xr[k * s1] * w[k];
            double r = (p + b) - (double)*(const T *)(j->y + i * j->sy);
            ss += r * r;
            sr += r;
            for (int64_t k = 0; k < f; k++)
                gx[k] += r * (double)xr[k * s1];
        }
    }
    part[0] = ss;
    part[1] = sr;
    if (gx == local)
        for (int64_t k = 0; k < f; k++)
            part[2 + k] = local[k];
}
