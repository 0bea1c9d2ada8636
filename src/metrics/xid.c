/* SPDX-License-Identifier: Apache-2.0 */
/* xid.c: what an XID means, in the words of NVIDIA's XID catalog, for the err_msg label
 * dcgm-exporter puts on DCGM_FI_DEV_XID_ERRORS (alert templates print it). Pure. */
#include "metrics/metrics.h"

static const struct {
    unsigned long long xid;
    const char *text;
} xids[] = {
    {13, "Graphics Engine Exception"},
    {31, "GPU memory page fault"},
    {32, "Invalid or corrupted push buffer stream"},
    {38, "Driver firmware error"},
    {43, "GPU stopped processing"},
    {45, "Preemptive cleanup, due to previous errors"},
    {48, "Double Bit ECC Error"},
    {61, "Internal micro-controller breakpoint/warning"},
    {62, "Internal micro-controller halt"},
    {63, "ECC page retirement or row remapping recording event"},
    {64, "ECC page retirement or row remapper recording failure"},
    {68, "NVDEC0 Exception"},
    {69, "Graphics Engine class error"},
    {74, "NVLINK Error"},
    {79, "GPU has fallen off the bus"},
    {92, "High single-bit ECC error rate"},
    {94, "Contained ECC error"},
    {95, "Uncontained ECC error"},
    {109, "Context Switch Timeout Error"},
    {119, "GSP RPC Timeout"},
    {120, "GSP Error"},
    {121, "C2C Link Error"},
    {140, "Unrecovered ECC Error"},
    {154, "GPU Recovery Action Changed"},
};

const char *metrics_xid_text(unsigned long long xid)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(xids); i++)
        if (xids[i].xid == xid)
            return xids[i].text;
    return "";
}
