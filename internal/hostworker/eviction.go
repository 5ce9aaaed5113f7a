package hostworker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/activities"
	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/workspace"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// EvictionConfig configures eviction on a host (README
// "Configuration", the SANDBOX_EVICTION_* and SANDBOX_DISK_BUDGET_* rows).
type EvictionConfig struct {
	// Interval between scheduled EvictionCronWorkflow runs
	// (SANDBOX_EVICTION_INTERVAL, default 5m); 0 means this worker neither
	// creates nor updates the schedule.
	Interval time.Duration
	// Policy: SANDBOX_EVICTION_RUNTIME_STOP, _RUNTIME_DESTROY, _TTL_ANALYSIS,
	// _TTL_TASK, _TTL_EDIT, _MIN_IDLE, _HIGH_WATER, _LOW_WATER, _SEVERE_WATER.
	Policy eviction.Policy
	// DiskBudgetBytes (SANDBOX_DISK_BUDGET_BYTES, default 0): when positive,
	// the budget in bytes against the bytes of the files under the data dir.
	DiskBudgetBytes int64
	// DiskBudgetFraction (SANDBOX_DISK_BUDGET_FRACTION, default 1): otherwise
	// the budget is this fraction of the data dir's filesystem, against that
	// filesystem's used bytes.
	DiskBudgetFraction float64
}

// DefaultEvictionInterval is SANDBOX_EVICTION_INTERVAL's default.
const DefaultEvictionInterval = 5 * time.Minute

// evictionFromEnv reads the eviction variables; errors are *ConfigError.
func evictionFromEnv(get func(name, def string) string) (EvictionConfig, error) {
	c := EvictionConfig{Policy: eviction.DefaultPolicy(), DiskBudgetFraction: 1}
	durations := []struct {
		name   string
		dst    *time.Duration
		def    time.Duration
		zeroOK bool
	}{
		{"SANDBOX_EVICTION_INTERVAL", &c.Interval, DefaultEvictionInterval, true},
		{"SANDBOX_EVICTION_RUNTIME_STOP", &c.Policy.RuntimeIdleStop, eviction.DefaultRuntimeIdleStop, false},
		{"SANDBOX_EVICTION_RUNTIME_DESTROY", &c.Policy.RuntimeStoppedDestroy, eviction.DefaultRuntimeStoppedDestroy, false},
		{"SANDBOX_EVICTION_TTL_ANALYSIS", &c.Policy.AnalysisTTL, eviction.DefaultAnalysisTTL, false},
		{"SANDBOX_EVICTION_TTL_TASK", &c.Policy.TaskTTL, eviction.DefaultTaskTTL, false},
		{"SANDBOX_EVICTION_TTL_EDIT", &c.Policy.EditTTL, eviction.DefaultEditTTL, false},
		{"SANDBOX_EVICTION_MIN_IDLE", &c.Policy.PressureMinIdle, eviction.DefaultPressureMinIdle, false},
	}
	for _, d := range durations {
		v := get(d.name, d.def.String())
		dur, err := sandbox.ParseDuration(v)
		if err != nil || dur < 0 || (dur == 0 && !d.zeroOK) {
			return c, &ConfigError{d.name, v, "want a positive duration such as 30s, 20m or 336h, or a number of seconds"}
		}
		*d.dst = dur
	}
	if c.Interval > 0 && c.Interval < time.Second {
		return c, &ConfigError{"SANDBOX_EVICTION_INTERVAL", c.Interval.String(), "want 0 or at least 1s"}
	}
	marks := []struct {
		name string
		dst  *float64
		def  float64
	}{
		{"SANDBOX_EVICTION_HIGH_WATER", &c.Policy.HighWater, eviction.DefaultHighWater},
		{"SANDBOX_EVICTION_LOW_WATER", &c.Policy.LowWater, eviction.DefaultLowWater},
		{"SANDBOX_EVICTION_SEVERE_WATER", &c.Policy.SevereWater, eviction.DefaultSevereWater},
		{"SANDBOX_DISK_BUDGET_FRACTION", &c.DiskBudgetFraction, 1},
	}
	for _, m := range marks {
		v := get(m.name, strconv.FormatFloat(m.def, 'f', -1, 64))
		f, err := parseFraction(v)
		if err != nil {
			return c, &ConfigError{m.name, v, "want a fraction in (0, 1] such as 0.85 or a percentage such as 85%"}
		}
		*m.dst = f
	}
	if err := c.Policy.Validate(); err != nil {
		return c, &ConfigError{"SANDBOX_EVICTION_LOW_WATER", fmt.Sprint(c.Policy.LowWater), "want low < high <= severe water marks"}
	}
	v := get("SANDBOX_DISK_BUDGET_BYTES", "0")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return c, &ConfigError{"SANDBOX_DISK_BUDGET_BYTES", v, "want a number of bytes (0: a fraction of the filesystem)"}
	}
	c.DiskBudgetBytes = n
	return c, nil
}

// parseFraction reads "0.85" or "85%" into (0, 1].
func parseFraction(v string) (float64, error) {
	s, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if pct {
		f /= 100
	}
	if !(f > 0 && f <= 1) {
		return 0, errors.New("out of range")
	}
	return f, nil
}

// wireEviction sets up eviction on a host: the backup provider
// (<data dir>/evicted, used by eviction and by acquire to restore), the
// eviction activities on both queues, EvictionCronWorkflow on the shared
// queue, and — unless the interval is 0 — the Temporal Schedule.
func (h *Host) wireEviction(ctx context.Context, wss *workspace.Manager, shared, hostQ worker.Worker) error {
	cfg := h.Config
	backups, err := workspace.NewBackups(wss, filepath.Join(cfg.DataDir, "evicted"))
	if err != nil {
		return err
	}
	h.Activities.Backups = backups
	ev := &activities.EvictionActivities{
		Activities: h.Activities, Client: h.Client, DataDir: cfg.DataDir, Policy: cfg.Eviction.Policy,
		DiskBudgetBytes: cfg.Eviction.DiskBudgetBytes, DiskBudgetFraction: cfg.Eviction.DiskBudgetFraction,
	}
	if h.Volumes != nil {
		ev.VolumesDir = h.Volumes.Dir()
	}
	ev.Register(shared)
	ev.Register(hostQ)
	shared.RegisterWorkflowWithOptions(workflows.EvictionCronWorkflow, workflow.RegisterOptions{Name: sandboxapi.EvictionCronWorkflowType})
	if cfg.Eviction.Interval <= 0 {
		h.log.Info("eviction schedule left alone (SANDBOX_EVICTION_INTERVAL=0)")
		return nil
	}
	if err := EnsureEvictionSchedule(ctx, h.Client, cfg.TaskQueue, cfg.Eviction.Interval); err != nil {
		return fmt.Errorf("eviction schedule %s: %w", sandboxapi.EvictionScheduleIDFor(cfg.TaskQueue), err)
	}
	h.log.Info("eviction schedule ready", "schedule", sandboxapi.EvictionScheduleIDFor(cfg.TaskQueue), "every", cfg.Eviction.Interval)
	return nil
}

// evictionRunTimeout bounds one scheduled run (replies wait at most
// sandboxapi.DefaultEvictionReplyTimeout; planning and cache removal are bounded too).
const evictionRunTimeout = 2 * time.Hour

// EnsureEvictionSchedule creates, or updates to the given interval and
// action, the Temporal Schedule sandboxapi.EvictionScheduleIDFor(taskQueue)
// that starts EvictionCronWorkflow (zero EvictionInput) on taskQueue every
// interval, with overlap policy SKIP (a run still going makes the next one
// skip). Idempotent and safe when several workers start at once. Errors: the
// Temporal client's.
func EnsureEvictionSchedule(ctx context.Context, c client.Client, taskQueue string, every time.Duration) error {
	id := sandboxapi.EvictionScheduleIDFor(taskQueue)
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{
		ID:                       id + "-run",
		Workflow:                 sandboxapi.EvictionCronWorkflowType,
		Args:                     []any{sandboxapi.EvictionInput{}},
		TaskQueue:                taskQueue,
		WorkflowExecutionTimeout: evictionRunTimeout,
		StaticSummary:            sandboxapi.EvictionRunSummary("schedule "+id, sandboxapi.EvictionInput{}),
	}
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID: id, Spec: spec, Action: action, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note: "sandboxcore tiered eviction (docs/DESIGN.md \"Eviction policy\"); created by the workers, see README \"Configuration\"",
	})
	if err == nil || !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return err
	}
	return sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &spec
			s.Action = action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
}
