/* hpcmem-report: plots as SVG (PNG copies through rsvg-convert when it is
 * installed).  Three figures, as in WMTrace's analysis:
 *   memory-over-time.svg   live bytes per rank over time, and the job's sum
 *   hwm-per-rank.svg       the high-water mark of each rank, mean and sd
 *   top-stacks.svg         what holds the memory at the peak: the functions of
 *                          the job peak and the stacks of the heaviest rank */
#include "config.h"
#include "report.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define W 960
#define H 540
#define ML 90   /* margins */
#define MR 170
#define MT 50
#define MB 60

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                     "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void xml(FILE *o, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", o); break;
      case '>': fputs("&gt;", o); break;
      case '&': fputs("&amp;", o); break;
      case '"': fputs("&quot;", o); break;
      default: fputc(*s, o);
    }
  }
}

/* A round step for about n ticks over [0, max]. */
static double nice_step(double max, int n) {
  if (max <= 0) return 1;
  double raw = max / n, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

/* bytes in a binary unit that suits the axis maximum */
static double unit_of(double max, const char **name) {
  static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  double d = 1;
  while (max / d >= 1024 && i < 4) { d *= 1024; i++; }
  *name = u[i];
  return d;
}

static void begin(FILE *o, const char *title) {
  fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n"
             "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
             "<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">",
          W, H, W, H, ML);
  xml(o, title);
  fputs("</text>\n", o);
}

/* axes with ticks: x in [0, xmax] seconds or categories (xmax < 0), y in bytes */
static double axes(FILE *o, double xmax, double ymax, const char *xlabel, const char **yunit) {
  double ud = unit_of(ymax, yunit);
  int pw = W - ML - MR, ph = H - MT - MB;
  fprintf(o, "<g stroke=\"#444\" fill=\"none\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n",
          ML, MT, ML, MT + ph, ML, MT + ph, ML + pw, MT + ph);
  double ys = nice_step(ymax / ud, 5);
  for (double v = 0; v <= ymax / ud * 1.0001; v += ys) {
    double y = MT + ph - (ymax > 0 ? v * ud / ymax * ph : 0);
    fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
               "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
            ML, y, ML + pw, y, ML - 6, y + 4, v);
  }
  fprintf(o, "<text x=\"18\" y=\"%d\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">live memory (%s)</text>\n",
          MT + ph / 2, MT + ph / 2, *yunit);
  if (xmax > 0) {
    double xs = nice_step(xmax, 8);
    for (double v = 0; v <= xmax * 1.0001; v += xs) {
      double x = ML + v / xmax * pw;
      fprintf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>"
                 "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
              x, MT + ph, x, MT + ph + 5, x, MT + ph + 20, v);
    }
  }
  fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", ML + pw / 2, H - 15, xlabel);
  return ud;
}

static void curve(FILE *o, const rpt_t *R, const rpt_timeline_t *tl, double xmax, double ymax, const char *color,
                  double width) {
  int pw = W - ML - MR, ph = H - MT - MB;
  fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"", color, width);
  double prev = 0;
  for (int b = 0; b < tl->n; b++) {
    if (!tl->seen[b]) continue;
    double x0 = rpt_seconds(R, tl->t0 + (uint64_t)b * tl->width), x1 = rpt_seconds(R, tl->t0 + (uint64_t)(b + 1) * tl->width);
    if (x1 > xmax) x1 = xmax;
    double px0 = ML + (xmax > 0 ? x0 / xmax * pw : 0), px1 = ML + (xmax > 0 ? x1 / xmax * pw : 0);
    double ym = MT + ph - (ymax > 0 ? (double)tl->max[b] / ymax * ph : 0);
    double yl = MT + ph - (ymax > 0 ? (double)tl->last[b] / ymax * ph : 0);
    /* step from the previous level to this bucket's peak, then its end value */
    fprintf(o, "%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f ", px0, prev ? prev : (double)(MT + ph), px0, ym, px1, ym, px1, yl);
    prev = yl;
  }
  fputs("\"/>\n", o);
}

static double t_end(const rpt_t *R) {
  uint64_t t = R->t0;
  for (size_t i = 0; i < R->np; i++) if (R->p[i].t_last > t) t = R->p[i].t_last;
  double s = rpt_seconds(R, t);
  return s > 0 ? s : 1e-9;
}

/* "4 ranks", or "1 process" for the processes of a run without MPI. */
static const char *how_many(const rpt_t *R, char *buf, size_t len) {
  int ranked = 0;
  for (size_t i = 0; i < R->np; i++) ranked |= rpt_is_rank(&R->p[i]);
  if (ranked) snprintf(buf, len, "%zu rank%s", R->np, R->np == 1 ? "" : "s");
  else snprintf(buf, len, "%zu process%s", R->np, R->np == 1 ? "" : "es");
  return buf;
}

static int plot_time(rpt_t *R, FILE *o) {
  char title[256], lab[64], b[32], n[32];
  snprintf(title, sizeof title, "Memory over time, job %s (%s)", R->p[0].h.jobid, how_many(R, n, sizeof n));
  begin(o, title);
  double xmax = t_end(R), ymax = 1;
  for (size_t i = 0; i < R->np; i++) if ((double)R->p[i].peak > ymax) ymax = (double)R->p[i].peak;
  ymax *= 1.05;
  const char *unit;
  axes(o, xmax, ymax, "time (s)", &unit);
  size_t *order = rpt_ranks_by_hwm(R);
  /* many ranks: thin grey lines, the heaviest and lightest in colour */
  int many = R->np > 10;
  for (size_t k = R->np; k-- > 0;) {
    size_t i = order[k];
    int hi = !many || k == 0 || k == R->np - 1;
    const char *c = hi ? colors[(many ? (k == 0 ? 3 : 0) : i) % 10] : "#bbb";
    curve(o, R, &R->p[i].tl, xmax, ymax, c, hi ? 1.6 : 0.7);
  }
  int ly = MT + 10;
  for (size_t k = 0; k < R->np; k++) {
    size_t i = order[k];
    if (many && k != 0 && k != R->np - 1) continue;
    const char *c = colors[(many ? (k == 0 ? 3 : 0) : i) % 10];
    rpt_proc_name(R, &R->p[i], lab, sizeof lab);
    rpt_bytes((double)R->p[i].peak, b, sizeof b);
    fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"3\" fill=\"%s\"/>", W - MR + 12, ly, c);
    /* MR - 30 px hold about 20 characters: a longer name (processes of
     * one rank told apart by pid, a process without a rank) puts its peak
     * on a line of its own */
    if (strlen(lab) + strlen(b) + 2 <= (MR - 30) / 7) {
      fprintf(o, "<text x=\"%d\" y=\"%d\">%s: %s</text>\n", W - MR + 30, ly + 5, lab, b);
    } else {
      fprintf(o, "<text x=\"%d\" y=\"%d\">%.23s</text><text x=\"%d\" y=\"%d\">%s</text>\n", W - MR + 30, ly + 5,
              lab, W - MR + 30, ly + 19, b);
      ly += 14;
    }
    ly += 18;
  }
  if (many) fprintf(o, "<text x=\"%d\" y=\"%d\" fill=\"#888\">other ranks in grey</text>\n", W - MR + 12, ly + 5);
  free(order);
  fputs("</svg>\n", o);
  return 0;
}

static int plot_job(rpt_t *R, FILE *o) {
  char title[256], b[32], n[32];
  snprintf(title, sizeof title, "Memory of the whole job over time (sum of %s): peak %s at %.3f s", how_many(R, n, sizeof n),
           rpt_bytes((double)R->peak, b, sizeof b), rpt_seconds(R, R->peak_t));
  begin(o, title);
  double xmax = t_end(R), ymax = (double)(R->peak > 0 ? R->peak : 1) * 1.05;
  const char *unit;
  axes(o, xmax, ymax, "time (s)", &unit);
  curve(o, R, &R->tl, xmax, ymax, colors[0], 1.6);
  int pw = W - ML - MR, ph = H - MT - MB;
  double px = ML + rpt_seconds(R, R->peak_t) / xmax * pw, py = MT + ph - (double)R->peak / ymax * ph;
  fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", px, py, colors[3]);
  fputs("</svg>\n", o);
  return 0;
}

static int plot_hwm(rpt_t *R, FILE *o) {
  char title[256], b[32], lab[64];
  double mn, mx, mean, sd;
  size_t imin, imax;
  rpt_hwm_stats(R, &mn, &mx, &mean, &sd, &imin, &imax);
  snprintf(title, sizeof title, "High-water mark per rank: mean %s, CV %.1f%%", rpt_bytes(mean, b, sizeof b),
           mean > 0 ? 100 * sd / mean : 0.0);
  begin(o, title);
  double ymax = (mx > 0 ? mx : 1) * 1.1;
  const char *unit;
  axes(o, -1, ymax, "rank", &unit);
  int pw = W - ML - MR, ph = H - MT - MB;
  double bw = (double)pw / (double)R->np;
  for (size_t i = 0; i < R->np; i++) {
    const rpt_proc_t *P = &R->p[i];
    double h = (double)P->peak / ymax * ph, x = ML + bw * (double)i;
    const char *c = i == imax ? colors[3] : i == imin ? colors[2] : colors[0];
    fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s: %s</title></rect>\n",
            x + bw * 0.1, MT + ph - h, bw * 0.8, h, c, rpt_proc_name(R, P, lab, sizeof lab),
            rpt_bytes((double)P->peak, b, sizeof b));
    /* under the bar the rank alone, "-" for a process without one (its
     * title above has the pid) */
    char num[16] = "-";
    if (rpt_is_rank(P)) snprintf(num, sizeof num, "%d", P->h.rank);
    if (R->np <= 32 || i % (R->np / 16 + 1) == 0)
      fprintf(o, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + bw / 2, MT + ph + 18, num);
  }
  double ym = MT + ph - mean / ymax * ph, ys = sd / ymax * ph;
  fprintf(o, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#888\" opacity=\"0.15\"/>\n", ML, ym - ys, pw, 2 * ys);
  fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\" stroke-dasharray=\"6,4\"/>\n", ML, ym,
          ML + pw, ym);
  fprintf(o, "<text x=\"%d\" y=\"%.1f\">mean</text><text x=\"%d\" y=\"%.1f\" fill=\"#666\">&#177; sd</text>\n",
          W - MR + 8, ym + 4, W - MR + 8, ym - ys + 4);
  fputs("</svg>\n", o);
  return 0;
}

static void hbars(FILE *o, const char *heading, int y0, int rows, const char **labels, const double *v, size_t n,
                  double total, const char *color) {
  /* room right of the longest bar for its value, "1023.99 KiB (100.0%)":
   * 20 characters of about 7 px */
  int pw = W - ML - 260 - 150;
  char b[32];
  fprintf(o, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">", ML, y0);
  xml(o, heading);
  fputs("</text>\n", o);
  double vmax = n ? v[0] : 1;
  for (size_t i = 0; i < n && (int)i < rows; i++) {
    int y = y0 + 10 + (int)i * 22;
    double w = vmax > 0 ? v[i] / vmax * pw : 0;
    fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>", ML + 260, y, w, color);
    fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", ML + 252, y + 12);
    char lab[80];
    snprintf(lab, sizeof lab, "%.40s%s", labels[i], strlen(labels[i]) > 40 ? "..." : "");
    xml(o, lab);
    fprintf(o, "</text><text x=\"%.1f\" y=\"%d\">%s (%.1f%%)</text>\n", ML + 266 + w, y + 12, rpt_bytes(v[i], b, sizeof b),
            total > 0 ? 100 * v[i] / total : 0.0);
  }
}

static int plot_top(rpt_t *R, FILE *o) {
  char title[256], lab[64], b[32];
  size_t *order = rpt_ranks_by_hwm(R);
  rpt_proc_t *P = &R->p[order[0]];
  free(order);
  snprintf(title, sizeof title, "What holds the memory at the peak");
  begin(o, title);
  int rows = R->o.top > 8 ? 8 : R->o.top;
  size_t n;
  rpt_agg_t *a = rpt_aggregate(R, NULL, 0, 1, &n);
  const char *labels[16] = {0};
  double v[16] = {0};
  size_t k = 0;
  for (; k < n && (int)k < rows && a[k].bytes > 0; k++) { labels[k] = a[k].name; v[k] = (double)a[k].bytes; }
  char heading[200];
  snprintf(heading, sizeof heading, "Functions at the job peak (%s, all ranks)", rpt_bytes((double)R->peak, b, sizeof b));
  hbars(o, heading, 60, rows, labels, v, k, (double)R->peak, colors[0]);
  rpt_agg_free(a, n);
  /* stacks of the heaviest rank: the attribution frame and its caller */
  size_t ns;
  size_t *idx = rpt_top_stacks(R, P, 0, &ns);
  char names[16][300];
  k = 0;
  for (; k < ns && (int)k < rows; k++) {
    rpt_stack_t *s = &P->st[idx[k]];
    const rpt_lframe_t *lf;
    uint32_t d;
    if (s->attr >= 0 && rpt_lstack(R, P, s, &lf, &d) == 0 && (uint32_t)s->attr < d) {
      const hmt_sym_t *a0 = lf[s->attr].sym;
      char fb[300], cb[300];
      if ((uint32_t)s->attr + 1 < d) {
        char first[150];
        snprintf(first, sizeof first, "%s", rpt_function(a0, fb, sizeof fb));
        snprintf(names[k], sizeof names[k], "%s < %s", first, rpt_function(lf[s->attr + 1].sym, cb, sizeof cb));
      } else {
        snprintf(names[k], sizeof names[k], "%s", rpt_function(a0, fb, sizeof fb));
      }
    } else {
      snprintf(names[k], sizeof names[k], "(no stack)");
    }
    labels[k] = names[k];
    v[k] = (double)rpt_at_peak(P, s, NULL);
  }
  free(idx);
  snprintf(heading, sizeof heading, "Stacks at the peak of %s (%s)", rpt_proc_name(R, P, lab, sizeof lab),
           rpt_bytes((double)P->peak, b, sizeof b));
  hbars(o, heading, 60 + 30 + rows * 22 + 20, rows, labels, v, k, (double)P->peak, colors[1]);
  fputs("</svg>\n", o);
  return 0;
}

static char *find_in_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return NULL;
  char buf[4096];
  for (const char *p = path; *p;) {
    size_t l = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)l, p, prog);
    if (l && access(buf, X_OK) == 0) return strdup(buf);
    p += l;
    if (*p) p++;
  }
  return NULL;
}

static int to_png(const char *conv, const char *svg) {
  char png[4096];
  snprintf(png, sizeof png, "%.*s.png", (int)(strlen(svg) - 4), svg);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execl(conv, conv, "-o", png, svg, (char *)NULL);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int rpt_write_svgs(rpt_t *R, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "hpcmem-report: %s: %s\n", dir, strerror(errno));
    return -1;
  }
  struct { const char *name; int (*fn)(rpt_t *, FILE *); } plots[] = {
      {"memory-over-time.svg", plot_time}, {"job-memory-over-time.svg", plot_job},
      {"hwm-per-rank.svg", plot_hwm}, {"top-stacks.svg", plot_top}};
  char *conv = find_in_path("rsvg-convert");
  int rc = 0;
  for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, plots[i].name);
    FILE *o = fopen(path, "w");
    if (!o) { fprintf(stderr, "hpcmem-report: %s: %s\n", path, strerror(errno)); rc = -1; continue; }
    plots[i].fn(R, o);
    if (fclose(o) != 0) { fprintf(stderr, "hpcmem-report: %s: write error\n", path); rc = -1; continue; }
    if (conv && to_png(conv, path) != 0) fprintf(stderr, "hpcmem-report: warning: %s could not convert %s\n", conv, path);
  }
  free(conv);
  return rc;
}
