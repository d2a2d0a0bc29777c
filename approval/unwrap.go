package approval

// Wrapper is implemented by decorators of actions and notifiers (tracing,
// metrics): Unwrap returns what they decorate, so that the optional
// interfaces a decorator does not forward itself (Editor, Enroller, …)
// stay reachable.
type Wrapper interface {
	Unwrap() any
}

// optional returns v as a T, or the first thing it wraps that is one.
func optional[T any](v any) (T, bool) {
	for v != nil {
		if t, ok := v.(T); ok {
			return t, true
		}
		w, ok := v.(Wrapper)
		if !ok {
			break
		}
		v = w.Unwrap()
	}
	var zero T
	return zero, false
}
