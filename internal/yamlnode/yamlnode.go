// Package yamlnode holds what the project's YAML parsers (job specs,
// device profiles) share about yaml.v3 nodes: following aliases, and naming
// a value in an error.
package yamlnode

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Resolve follows n's aliases (at most 16, nil-safe) to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		if n.Alias == nil {
			break
		}
		n = n.Alias
	}
	return n
}

// Describe names a value for an error: its YAML type and, for a scalar, its
// text (cut at 40 characters), such as `string "24GiB"` or `a mapping`.
func Describe(n *yaml.Node) string {
	n = Resolve(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind != yaml.ScalarNode:
		return "an unsupported YAML node"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	}
	return fmt.Sprintf("%s %q", n.Tag, v)
}
