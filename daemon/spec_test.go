package daemon

import "github.com/gossipd/gossipd/model"

func testSpec() model.Spec { return model.Spec{Kind: model.Softmax, Inputs: 64, Classes: 10} }
