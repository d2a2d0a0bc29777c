package prom

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// goMemStats are client_golang's go_memstats_* metrics: name, help, type
// and value.
var goMemStats = []struct {
	name, help, typ string
	value           func(*runtime.MemStats) uint64
}{
	{"alloc_bytes", "Number of bytes allocated in heap and currently in use.", gaugeType, func(m *runtime.MemStats) uint64 { return m.Alloc }},
	{"alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", counterType, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
	{"sys_bytes", "Number of bytes obtained from system.", gaugeType, func(m *runtime.MemStats) uint64 { return m.Sys }},
	{"mallocs_total", "Total number of heap objects allocated, both live and gc-ed.", counterType, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
	{"frees_total", "Total number of heap objects frees.", counterType, func(m *runtime.MemStats) uint64 { return m.Frees }},
	{"heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapAlloc }},
	{"heap_sys_bytes", "Number of heap bytes obtained from system.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
	{"heap_idle_bytes", "Number of heap bytes waiting to be used.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapIdle }},
	{"heap_inuse_bytes", "Number of heap bytes that are in use.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapInuse }},
	{"heap_released_bytes", "Number of heap bytes released to OS.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapReleased }},
	{"heap_objects", "Number of currently allocated objects.", gaugeType, func(m *runtime.MemStats) uint64 { return m.HeapObjects }},
	{"stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", gaugeType, func(m *runtime.MemStats) uint64 { return m.StackInuse }},
	{"stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", gaugeType, func(m *runtime.MemStats) uint64 { return m.StackSys }},
	{"mspan_inuse_bytes", "Number of bytes in use by mspan structures.", gaugeType, func(m *runtime.MemStats) uint64 { return m.MSpanInuse }},
	{"mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system.", gaugeType, func(m *runtime.MemStats) uint64 { return m.MSpanSys }},
	{"mcache_inuse_bytes", "Number of bytes in use by mcache structures.", gaugeType, func(m *runtime.MemStats) uint64 { return m.MCacheInuse }},
	{"mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system.", gaugeType, func(m *runtime.MemStats) uint64 { return m.MCacheSys }},
	{"buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table.", gaugeType, func(m *runtime.MemStats) uint64 { return m.BuckHashSys }},
	{"gc_sys_bytes", "Number of bytes used for garbage collection system metadata.", gaugeType, func(m *runtime.MemStats) uint64 { return m.GCSys }},
	{"other_sys_bytes", "Number of bytes used for other system allocations.", gaugeType, func(m *runtime.MemStats) uint64 { return m.OtherSys }},
	{"next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", gaugeType, func(m *runtime.MemStats) uint64 { return m.NextGC }},
}

// goRuntimeMetrics are the runtime/metrics client_golang exposes by default.
var goRuntimeMetrics = []struct{ name, help, sample string }{
	{"go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100.", "/gc/gogc:percent"},
	{"go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", "/gc/gomemlimit:bytes"},
	{"go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously.", "/sched/gomaxprocs:threads"},
}

// GoCollector writes the Go runtime's metrics under client_golang's
// default names (go_goroutines, go_threads, go_gc_duration_seconds,
// go_info, go_memstats_*, go_gc_gogc_percent, go_gc_gomemlimit_bytes,
// go_sched_gomaxprocs_threads).
func GoCollector() Collector {
	names := []string{"go_goroutines", "go_threads", "go_gc_duration_seconds", "go_memstats_last_gc_time_seconds", "go_info"}
	for _, m := range goMemStats {
		names = append(names, "go_memstats_"+m.name)
	}
	for _, m := range goRuntimeMetrics {
		names = append(names, m.name)
	}
	return CollectorFunc{MetricNames: names, Func: collectGo}
}

func collectGo() []Family {
	threads, _ := runtime.ThreadCreateProfile(nil)
	fams := []Family{
		GaugeSample("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		GaugeSample("go_threads", "Number of OS threads created.", float64(threads)),
		GaugeSample("go_info", "Information about the Go environment.", 1, "version", runtime.Version()),
	}
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	summary := Family{Name: "go_gc_duration_seconds", Help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", Type: summaryType}
	for i, q := range gc.PauseQuantiles {
		summary.Samples = append(summary.Samples, Sample{Labels: []string{"quantile", FormatFloat(float64(i) / 4)}, Value: q.Seconds()})
	}
	summary.Samples = append(summary.Samples,
		Sample{Suffix: "_sum", Value: gc.PauseTotal.Seconds()},
		Sample{Suffix: "_count", Value: float64(gc.NumGC)})
	fams = append(fams, summary,
		GaugeSample("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(gc.LastGC.UnixNano())/1e9))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, m := range goMemStats {
		fams = append(fams, Family{Name: "go_memstats_" + m.name, Help: m.help, Type: m.typ, Samples: []Sample{{Value: float64(m.value(&ms))}}})
	}
	samples := make([]metrics.Sample, len(goRuntimeMetrics))
	for i, m := range goRuntimeMetrics {
		samples[i].Name = m.sample
	}
	metrics.Read(samples)
	for i, m := range goRuntimeMetrics {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			fams = append(fams, GaugeSample(m.name, m.help, float64(samples[i].Value.Uint64())))
		}
	}
	return fams
}

// ProcessCollector writes the process's metrics under client_golang's
// names (process_cpu_seconds_total, process_open_fds, process_max_fds,
// process_virtual_memory_bytes, process_virtual_memory_max_bytes,
// process_resident_memory_bytes, process_start_time_seconds,
// process_network_receive_bytes_total,
// process_network_transmit_bytes_total), read from /proc as it does; a
// figure that cannot be read is left out.
func ProcessCollector() Collector {
	return CollectorFunc{MetricNames: []string{"process_cpu_seconds_total", "process_open_fds", "process_max_fds",
		"process_virtual_memory_bytes", "process_virtual_memory_max_bytes", "process_resident_memory_bytes",
		"process_start_time_seconds", "process_network_receive_bytes_total", "process_network_transmit_bytes_total"}, Func: collectProcess}
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on every Linux
// architecture Go supports), as procfs assumes too.
const userHZ = 100

func collectProcess() []Family {
	var fams []Family
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state is field 3, utime 14, stime 15, starttime 22,
		// vsize 23, rss 24.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			num := func(field int) (float64, bool) {
				if field-3 >= len(f) {
					return 0, false
				}
				v, err := strconv.ParseUint(f[field-3], 10, 64)
				return float64(v), err == nil
			}
			utime, ok1 := num(14)
			stime, ok2 := num(15)
			if ok1 && ok2 {
				fams = append(fams, CounterSample("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", (utime+stime)/userHZ))
			}
			if v, ok := num(23); ok {
				fams = append(fams, GaugeSample("process_virtual_memory_bytes", "Virtual memory size in bytes.", v))
			}
			if v, ok := num(24); ok {
				fams = append(fams, GaugeSample("process_resident_memory_bytes", "Resident memory size in bytes.", v*float64(os.Getpagesize())))
			}
			if start, ok := num(22); ok {
				if boot, ok := bootTime(); ok {
					fams = append(fams, GaugeSample("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+start/userHZ))
				}
			}
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		fams = append(fams, GaugeSample("process_open_fds", "Number of open file descriptors.", float64(len(fds))))
	}
	if limits, err := os.ReadFile("/proc/self/limits"); err == nil {
		if v, ok := softLimit(string(limits), "Max open files"); ok {
			fams = append(fams, GaugeSample("process_max_fds", "Maximum number of open file descriptors.", v))
		}
		if v, ok := softLimit(string(limits), "Max address space"); ok {
			fams = append(fams, GaugeSample("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", v))
		}
	}
	if netstat, err := os.ReadFile("/proc/self/net/netstat"); err == nil {
		if in, out, ok := ipOctets(string(netstat)); ok {
			fams = append(fams,
				CounterSample("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", in),
				CounterSample("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", out))
		}
	}
	return fams
}

// bootTime is the btime line of /proc/stat.
func bootTime() (float64, bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return float64(n), err == nil
		}
	}
	return 0, false
}

// softLimit is a limit's soft value in /proc/self/limits; unlimited is the
// largest uint64, as procfs reads it.
func softLimit(limits, name string) (float64, bool) {
	for _, line := range strings.Split(limits, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			if f[0] == "unlimited" {
				return float64(^uint64(0)), true
			}
			v, err := strconv.ParseUint(f[0], 10, 64)
			return float64(v), err == nil
		}
	}
	return 0, false
}

// ipOctets are IpExt's InOctets and OutOctets in /proc/self/net/netstat
// (a header line of names, then a line of values).
func ipOctets(netstat string) (in, out float64, ok bool) {
	lines := strings.Split(netstat, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "IpExt: ") || !strings.HasPrefix(lines[i+1], "IpExt: ") {
			continue
		}
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		var gotIn, gotOut bool
		for j := 1; j < len(names) && j < len(values); j++ {
			v, err := strconv.ParseUint(values[j], 10, 64)
			if err != nil {
				continue
			}
			switch names[j] {
			case "InOctets":
				in, gotIn = float64(v), true
			case "OutOctets":
				out, gotOut = float64(v), true
			}
		}
		return in, out, gotIn && gotOut
	}
	return 0, 0, false
}
