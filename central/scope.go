package central

import (
	"fmt"
	"strings"

	"github.com/gossipd/gossipd/model"
)

// Options apply to some runs only. One given for a run it does not apply
// to would be silently ignored, and a comparison made with it silently
// wrong, so CheckOptions refuses it.

// scopes are CheckOptions' rules for a centralized run (`gossipd
// train`), by flag name.
var scopes = map[string]struct {
	applies func(c *Config) bool
	to      string
}{
	"hidden":       {func(c *Config) bool { return c.Model == model.MLP }, "--model mlp"},
	"input-shape":  {func(c *Config) bool { return model.IsLayered(c.Model) }, "a layered --model (a preset such as lenet5, or layers)"},
	"lambda":       {func(c *Config) bool { return c.Model == model.SVM }, "--model svm"},
	"momentum":     {func(c *Config) bool { return c.optimizer() == "sgd" }, "--optimizer sgd"},
	"lr":           {func(c *Config) bool { return c.optimizer() != "pegasos" }, "sgd and adam (pegasos steps by 1/(λt))"},
	"weight-decay": {func(c *Config) bool { return c.optimizer() != "pegasos" }, "sgd and adam (pegasos regularises by --lambda)"},
	"partition":    {func(c *Config) bool { return c.Shard != "" }, "--shard (it says how the shards are cut)"},
}

// optimizer is the optimizer c resolves to.
func (c *Config) optimizer() string {
	switch {
	case c.Optimizer != "":
		return strings.ToLower(c.Optimizer)
	case c.Model == model.SVM:
		return "pegasos"
	}
	return "sgd"
}

// CheckOptions refuses the options named in set (flag names, as `gossipd
// train` spells them) that do not apply to c, which would otherwise be
// silently ignored.
func (c *Config) CheckOptions(set []string) error {
	var bad []string
	for _, name := range set {
		if s, ok := scopes[name]; ok && !s.applies(c) {
			bad = append(bad, fmt.Sprintf("--%s applies to %s, not to this run (--model %s, --optimizer %s)", name, s.to, c.Model, c.optimizer()))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}
