package zoo_test

import (
	"fmt"

	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

func ExampleBuild() {
	g, err := zoo.Build("ResNet-50", workload.Train, 16, zoo.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Model, g.Kind, g.Batch, g.ParamCount())
	fmt.Println("optimizer state bytes:", g.BytesOfKind(workload.OptimizerState))
	// Output:
	// resnet50 train 16 25557032
	// optimizer state bytes: 204456256
}

func ExampleCanonical() {
	name, ok := zoo.Canonical("inception_v3")
	fmt.Println(name, ok)
	_, ok = zoo.Canonical("alexnet")
	fmt.Println(ok)
	// Output:
	// inception-v3 true
	// false
}
