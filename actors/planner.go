package actors

// DefaultPlanner is the planner the runtime uses: TENSILE when it is built
// in, else the baseline planner.
func DefaultPlanner() Planner { return &BaselinePlanner{} }
