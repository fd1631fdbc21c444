package main

// The Grafana dashboards (charts/wal/dashboards, a ConfigMap with metrics.dashboards.enabled)
// and the PrometheusRule's alerts, held to the metrics the processes export. Every `wal_...`
// name in a panel's query, a template variable's query or an alert's expression must be one
// that the Rust code registers: the first argument of a counter!, gauge! or histogram! call,
// or of a describe_counter!, describe_gauge! or describe_histogram! call, in any .rs file
// under a src/ folder of the repository (a string literal, or a `const NAME: &str = "..."`
// the call names). The Prometheus exporter (metrics-exporter-prometheus) serves those names as
// they are written, `_total` included: it appends nothing to counters. A histogram with
// buckets is served as NAME_bucket, NAME_sum and NAME_count; one without (a summary) as NAME
// with quantiles, NAME_sum and NAME_count. Which histograms have buckets is read from the
// recorder's set-up (runtime/src/process/telemetry.rs).

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The repository's root, from charts/check.
const repository = "../.."

var (
	// `const NAME: &str = "value";` (pub or not).
	rustConst = regexp.MustCompile(`\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:'static\s+)?str\s*=\s*"([^"]*)"\s*;`)
	// A metrics macro and its first argument: a string literal, or a constant by (a path to)
	// its name.
	rustMetric = regexp.MustCompile(`\b(describe_)?(counter|gauge|histogram)!\s*\(\s*([^,)]+?)\s*[,)]`)
	// The recorder's bucket matchers: `Matcher::Suffix("_seconds".into())` and the like.
	rustBuckets = regexp.MustCompile(`Matcher::(Full|Prefix|Suffix)\(\s*"([^"]*)"`)
	// The metric names a PromQL expression uses (its strings removed first).
	promqlMetric = regexp.MustCompile(`\bwal_[A-Za-z0-9_:]*`)
	promqlString = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
)

// Exported is what the processes serve: each metric's kind (counter, gauge, histogram) by
// name, and whether a histogram has buckets.
type Exported struct {
	Kinds map[string]string
	// The bucket matchers of runtime/src/process/telemetry.rs: kind (Full, Prefix, Suffix)
	// and text.
	Buckets [][2]string
}

func (e Exported) hasBuckets(name string) bool {
	for _, m := range e.Buckets {
		switch {
		case m[0] == "Full" && name == m[1],
			m[0] == "Prefix" && strings.HasPrefix(name, m[1]),
			m[0] == "Suffix" && strings.HasSuffix(name, m[1]):
			return true
		}
	}
	return false
}

// exportedMetrics reads the metric names the Rust code registers. A macro whose name it cannot
// read (a variable, a constant defined nowhere) fails the test: the list would be incomplete.
func exportedMetrics(t *testing.T) Exported {
	t.Helper()
	type source struct{ path, text string }
	var sources []source
	globals := map[string]map[string]bool{} // constant name -> its values anywhere
	err := filepath.WalkDir(repository, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repository && (strings.HasPrefix(name, ".") || name == "target") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".rs") || !strings.Contains(filepath.ToSlash(path), "/src/") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sources = append(sources, source{path, string(text)})
		for _, m := range rustConst.FindAllStringSubmatch(string(text), -1) {
			if globals[m[1]] == nil {
				globals[m[1]] = map[string]bool{}
			}
			globals[m[1]][m[2]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the Rust sources under %s: %v", repository, err)
	}
	exported := Exported{Kinds: map[string]string{}}
	for _, s := range sources {
		locals := map[string]string{}
		for _, m := range rustConst.FindAllStringSubmatch(s.text, -1) {
			locals[m[1]] = m[2]
		}
		for _, m := range rustMetric.FindAllStringSubmatch(s.text, -1) {
			kind, arg := m[2], m[3]
			var name string
			switch segments := strings.Split(arg, "::"); {
			case strings.HasPrefix(arg, `"`) && strings.HasSuffix(arg, `"`) && len(arg) >= 2:
				name = arg[1 : len(arg)-1]
			case locals[segments[len(segments)-1]] != "":
				name = locals[segments[len(segments)-1]]
			case len(globals[segments[len(segments)-1]]) == 1:
				for value := range globals[segments[len(segments)-1]] {
					name = value
				}
			default:
				t.Errorf("%s: cannot tell which metric %s!(%s, ...) names: name it by a string literal or a `const NAME: &str`, so this check sees it", s.path, m[1]+kind, arg)
				continue
			}
			if was, ok := exported.Kinds[name]; ok && was != kind {
				t.Errorf("%s: %s is a %s here and a %s elsewhere", s.path, name, kind, was)
			}
			exported.Kinds[name] = kind
		}
	}
	telemetry := filepath.Join(repository, "runtime", "src", "process", "telemetry.rs")
	text, err := os.ReadFile(telemetry)
	if err != nil {
		t.Fatalf("the recorder's set-up, for which histograms have buckets: %v", err)
	}
	for _, m := range rustBuckets.FindAllStringSubmatch(string(text), -1) {
		exported.Buckets = append(exported.Buckets, [2]string{m[1], m[2]})
	}
	if len(exported.Buckets) == 0 {
		t.Fatalf("%s sets no histogram buckets by Matcher: which histograms have buckets is unknown", telemetry)
	}
	// Not found at all: the walk looked in the wrong place, and every name would fail.
	if len(exported.Kinds) < 10 {
		t.Fatalf("found only %d metrics in the Rust sources under %s: %v", len(exported.Kinds), repository, exported.Kinds)
	}
	return exported
}

// unexported says why `name`, used in a query, is no series a process serves; "" when it is one.
func (e Exported) unexported(name string) string {
	if kind, ok := e.Kinds[name]; ok {
		if kind == "histogram" && e.hasBuckets(name) {
			return fmt.Sprintf("%s is a histogram: its series are %s_bucket, %s_sum and %s_count", name, name, name, name)
		}
		return ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || e.Kinds[base] != "histogram" {
			continue
		}
		if suffix == "_bucket" && !e.hasBuckets(base) {
			return fmt.Sprintf("%s has no buckets: the recorder gives buckets only to the histograms runtime/src/process/telemetry.rs matches, so %s is a summary (quantiles, _sum and _count)", name, base)
		}
		return ""
	}
	why := fmt.Sprintf("%s is no metric the processes export", name)
	if near := e.nearest(name); near != "" {
		why += fmt.Sprintf(" (did you mean %s?)", near)
	}
	return why
}

// nearest is the exported name closest to `name`, if any is close.
func (e Exported) nearest(name string) string {
	best, bestDistance := "", 4
	for known, kind := range e.Kinds {
		candidates := []string{known}
		if kind == "histogram" {
			candidates = []string{known + "_bucket", known + "_sum", known + "_count"}
		}
		for _, c := range candidates {
			if d := editDistance(name, c); d < bestDistance || (d == bestDistance && c < best) {
				best, bestDistance = c, d
			}
		}
	}
	return best
}

func editDistance(a, b string) int {
	previous := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current := make([]int, len(b)+1)
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
		}
		previous = current
	}
	return previous[len(b)]
}

// metricNames are the wal_ names `expr` uses, each once, its quoted strings left out (a label
// value such as a keyspace named wal_orders is no metric).
func metricNames(expr string) []string {
	seen := map[string]bool{}
	var names []string
	for _, name := range promqlMetric.FindAllString(promqlString.ReplaceAllString(expr, `""`), -1) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// checkDashboard returns what is wrong with the dashboard `file` holds as `text`: not JSON, no
// uid, title or panels, no Prometheus data source or namespace variable, or a query naming a
// metric no process exports (each naming the dashboard, the panel and the metric).
func checkDashboard(file, text string, exported Exported) (uid string, problems []string) {
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		return "", []string{fmt.Sprintf("dashboard %s: not valid JSON: %v", file, err)}
	}
	said := map[string]bool{}
	say := func(format string, args ...any) {
		problem := fmt.Sprintf("dashboard %s: ", file) + fmt.Sprintf(format, args...)
		if !said[problem] { // once for a panel's several queries
			said[problem] = true
			problems = append(problems, problem)
		}
	}
	if d.UID == "" || len(d.UID) > 40 {
		say("uid %q: Grafana needs one of 1 to 40 characters", d.UID)
	}
	if d.Title == "" {
		say("no title")
	}
	if d.SchemaVersion == 0 {
		say("no schemaVersion")
	}
	variables := map[string]string{}
	for _, v := range d.Templating.List {
		variables[v.Name] = v.Type
		query := ""
		var object struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &query) != nil && json.Unmarshal(v.Query, &object) == nil {
			query = object.Query
		}
		for _, name := range metricNames(query) {
			if why := exported.unexported(name); why != "" {
				say("variable %s: %s", v.Name, why)
			}
		}
	}
	if variables["datasource"] != "datasource" || variables["namespace"] != "query" {
		say("wants a datasource variable ${datasource} and a query variable ${namespace}; has %v", variables)
	}
	queries := 0
	var walk func(panels []grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			walk(p.Panels)
			if p.Type != "row" && p.Title == "" {
				say("a %s panel without a title", p.Type)
			}
			for _, target := range p.Targets {
				queries++
				if strings.TrimSpace(target.Expr) == "" {
					say("panel %q, query %s: no expr", p.Title, target.RefID)
				}
				for _, name := range metricNames(target.Expr) {
					if why := exported.unexported(name); why != "" {
						say("panel %q: %s", p.Title, why)
					}
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		say("no panels with queries")
	}
	return d.UID, problems
}

// renderedMonitoring renders the chart with the dashboards and the PrometheusRule on, and
// returns the dashboards (file name to JSON text) and the alerts' expressions by alert name.
func renderedMonitoring(t *testing.T) (map[string]string, map[string]string) {
	t.Helper()
	out, err := render(t, "--set", "metrics.dashboards.enabled=true", "--set", "metrics.prometheusRule.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	manifests, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	dashboards, alerts := map[string]string{}, map[string]string{}
	for _, m := range manifests {
		switch o := m.Object.(type) {
		case *corev1.ConfigMap:
			if o.Labels["grafana_dashboard"] == "1" {
				for file, text := range o.Data {
					dashboards[file] = text
				}
			}
		case *Resource[PrometheusRuleSpec]:
			for _, group := range o.Spec.Groups {
				for _, rule := range group.Rules {
					alerts[rule.Alert] = rule.Expr
				}
			}
		}
	}
	return dashboards, alerts
}

func TestDashboardsAndAlertsNameOnlyMetricsTheProcessesExport(t *testing.T) {
	exported := exportedMetrics(t)
	dashboards, alerts := renderedMonitoring(t)
	files, err := filepath.Glob(filepath.Join(chart, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dashboards) == 0 || len(dashboards) != len(files) {
		t.Fatalf("the ConfigMap labelled grafana_dashboard holds %d dashboards; the chart has %d: %v", len(dashboards), len(files), files)
	}
	uids := map[string]string{}
	var names []string
	for _, file := range sortedKeys(dashboards) {
		uid, problems := checkDashboard(file, dashboards[file], exported)
		for _, problem := range problems {
			t.Error(problem)
		}
		if other, ok := uids[uid]; ok && uid != "" {
			t.Errorf("dashboards %s and %s share uid %q", other, file, uid)
		}
		uids[uid] = file
		names = append(names, file)
	}
	if len(alerts) == 0 {
		t.Fatal("the PrometheusRule holds no alerts")
	}
	for _, alert := range sortedKeys(alerts) {
		for _, name := range metricNames(alerts[alert]) {
			if why := exported.unexported(name); why != "" {
				t.Errorf("alert %s: %s", alert, why)
			}
		}
	}
	t.Logf("%d dashboards (%s) and %d alerts against %d metrics the Rust code registers", len(names), strings.Join(names, ", "), len(alerts), len(exported.Kinds))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The check itself: what it must refuse, and how it says so.
func TestTheDashboardCheckRefusesUnknownMetricsAndBrokenDashboards(t *testing.T) {
	exported := Exported{
		Kinds:   map[string]string{"wal_x_total": "counter", "wal_y_seconds": "histogram", "wal_z": "histogram"},
		Buckets: [][2]string{{"Suffix", "_seconds"}},
	}
	variables := `"templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"},
		{"name": "namespace", "type": "query", "query": {"query": "label_values(wal_x_total, namespace)"}}]}`
	dashboard := func(expr string) string {
		return fmt.Sprintf(`{"uid": "u", "title": "T", "schemaVersion": 39, %s, "panels": [
			{"type": "row", "title": "R", "panels": [{"type": "timeseries", "title": "Writes", "targets": [{"refId": "A", "expr": %q}]}]}]}`, variables, expr)
	}
	cases := []struct{ text, says string }{
		{dashboard(`sum(rate(wal_x_total{queue="wal_not_a_metric"}[5m]))`), ""},
		{dashboard(`histogram_quantile(0.9, rate(wal_y_seconds_bucket[5m])) + wal_z{quantile="0.9"} + wal_z_sum`), ""},
		{dashboard(`sum(rate(wal_x_totl[5m]))`), `dashboard d.json: panel "Writes": wal_x_totl is no metric the processes export (did you mean wal_x_total?)`},
		{dashboard(`rate(wal_y_seconds[5m])`), `panel "Writes": wal_y_seconds is a histogram`},
		{dashboard(`rate(wal_z_bucket[5m])`), `panel "Writes": wal_z_bucket has no buckets`},
		{dashboard(``), `panel "Writes", query A: no expr`},
		{`{"uid": "u", "title": "T",`, "dashboard d.json: not valid JSON"},
		{`{"title": "T", "schemaVersion": 39, "panels": []}`, `uid ""`},
		{`{"uid": "u", "schemaVersion": 39, "panels": []}`, "no title"},
		{`{"uid": "u", "title": "T", "schemaVersion": 39, ` + variables + `}`, "no panels with queries"},
		{`{"uid": "u", "title": "T", "schemaVersion": 39, "panels": [{"type": "stat", "title": "S", "targets": [{"expr": "wal_x_total"}]}]}`, "wants a datasource variable"},
		{strings.Replace(dashboard(`wal_x_total`), "label_values(wal_x_total", "label_values(wal_w_total", 1), "variable namespace: wal_w_total is no metric"},
	}
	for _, c := range cases {
		_, problems := checkDashboard("d.json", c.text, exported)
		got := strings.Join(problems, "\n")
		if c.says == "" && got != "" || c.says != "" && !strings.Contains(got, c.says) {
			t.Errorf("%s\nsaid: %q\nwant: %q", c.text, got, c.says)
		}
	}
}
