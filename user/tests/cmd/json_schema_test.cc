// Every JSON document the tool prints names its kind and schema version.
#include "analysis/compare.h"
#include "cmd/compare.h"
#include "cmd/dmacost.h"
#include "cmd/pool.h"
#include "cmd/script.h"
#include "cmd/status.h"
#include "report/printer.h"
#include "util/json_num.h"

#include <string>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

void expect_schema(const nlohmann::json& j, const std::string& kind) {
    ASSERT_TRUE(j.contains("schema")) << kind << ": " << json_text(j);
    EXPECT_EQ(j["schema"], "nvmetrace." + kind + "/" + std::to_string(kJsonSchemaVersion));
}

TEST(JsonSchema, EveryDocumentNamesItsKindAndVersion) {
    EXPECT_EQ(json_schema("report"), "nvmetrace.report/1");
    expect_schema(summary_json(Summary{}, AssemblyCounts{}, ReportOptions{}), "report");
    expect_schema(interval_json(Interval{}), "interval");
    expect_schema(comparison_json(compare_summaries(Summary{}, Summary{})), "compare");
    expect_schema(status_json(ModuleVersion{}, Status{}), "status");
    expect_schema(pool_json(PoolInfo{}, ""), "pool");
    expect_schema(dmacost_json(DmaCost{}, "nvme0n1"), "dmacost");
    RecordingMeta meta;
    meta.role = "host";
    const ScriptFormat script(meta, "a.ntr");
    nvmetrace_rec r{};
    r.event = NVMETRACE_EV_BIO_QUEUE;
    expect_schema(script.json(r), "script");
}

}  // namespace
}  // namespace nvmetrace
