/* analysis/report: an analysis as text: the rates measured (demand, prep
 * per thread count, fetch cold and warm), whether the dataset fits in
 * memory, the bound and the stall (predicted and measured), the sweep's
 * levels when there are several, and the cure. sl__analysis_json is the
 * same as JSON. */
#ifndef SL_ANALYSIS_REPORT_H
#define SL_ANALYSIS_REPORT_H

#include <stdio.h>

#include "analysis/analysis.h"

void sl__analysis_report(FILE *f, const char *source, const sl__analysis_t *a);

#endif
