package fake

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateLimit is one route's limit of E2B's API rate limiter: Rate requests
// per Period (0: one second) with bursts of Burst, per team and route, as
// E2B's feature flag configures it (packages/api/internal/middleware/
// ratelimit/ratelimit.go:34-73 of e2b-dev/infra; a route without one is not
// limited).
type RateLimit struct {
	Rate, Burst int
	Period      time.Duration
}

// limiter is E2B's API rate limiter: a generic cell rate algorithm per
// route, as the redis_rate limiter E2B uses computes it (go-redis/redis_rate,
// script_allow_n.lua), and the middleware's answers (ratelimit.go:75-150).
// The fake has one team, so the key is the route.
type limiter struct {
	limits map[string]RateLimit // by gin route pattern, e.g. "/sandboxes/:sandboxID/timeout"
	mu     sync.Mutex
	tat    map[string]time.Time // theoretical arrival time per route
}

func newLimiter(limits map[string]RateLimit) *limiter {
	return &limiter{limits: limits, tat: map[string]time.Time{}}
}

// ginRoute is the gin route pattern of an OpenAPI path, the rate limit's
// key upstream (c.FullPath()): {param} becomes :param.
func ginRoute(openapiPath string) string {
	parts := strings.Split(openapiPath, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			parts[i] = ":" + p[1:len(p)-1]
		}
	}
	return strings.Join(parts, "/")
}

// allow applies the limit of route (an OpenAPI path) to one request: false
// when it is refused, w then holding E2B's answer — its RateLimit-* headers
// (ratelimit.go:126-129), Retry-After in whole seconds and at least 1
// (137-139), and 429 {"code":429,"message":"Rate limit exceeded"}
// (146-149). An allowed request gets the RateLimit-* headers.
func (l *limiter) allow(w http.ResponseWriter, route string, now time.Time) bool {
	key := ginRoute(route)
	lim, ok := l.limits[key]
	if !ok || lim.Rate <= 0 || lim.Burst <= 0 {
		return true
	}
	period := lim.Period
	if period <= 0 {
		period = time.Second
	}
	interval := period / time.Duration(lim.Rate)
	l.mu.Lock()
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	allowAt := next.Add(-interval * time.Duration(lim.Burst))
	diff := now.Sub(allowAt)
	allowed := diff >= 0
	remaining, resetAfter, retryAfter := 0, tat.Sub(now), -diff
	if allowed {
		l.tat[key] = next
		remaining, resetAfter = int(diff/interval), next.Sub(now)
	}
	l.mu.Unlock()
	w.Header().Set("RateLimit-Limit", strconv.Itoa(lim.Burst))
	w.Header().Set("RateLimit-Remaining", strconv.Itoa(remaining))
	w.Header().Set("RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(resetAfter.Seconds())), 10))
	if allowed {
		return true
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(int(retryAfter.Seconds()), 1)))
	writeError(w, nil, http.StatusTooManyRequests, "Rate limit exceeded")
	return false
}

// concurrencyMessage is E2B's answer (429) to a start beyond the team's
// concurrent sandboxes (packages/api/internal/orchestrator/
// create_instance.go:196-203 of e2b-dev/infra).
func concurrencyMessage(limit int) string {
	return "you have reached the maximum number of concurrent E2B sandboxes (" + strconv.Itoa(limit) +
		"). If you need more, please visit 'https://e2b.dev/docs/billing'"
}
