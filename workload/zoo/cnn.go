package zoo

import "strconv"

// buildVGG16 is torchvision's vgg16 (configuration D, no batch norm): 13 3×3
// convolutions with bias and ReLU in five stages separated by 2×2 max
// pooling, an adaptive 7×7 average pool (the identity on 224×224 inputs,
// still a kernel), and three fully connected layers 25088-4096-4096-1000.
func buildVGG16(b *builder, _ Options) {
	x, labels := b.imageInputs(224)
	cfg := []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}
	for i, c := range cfg {
		name := "features." + strconv.Itoa(i)
		if c == 0 {
			x = b.maxpool(name, x, 2, 2, 0)
			continue
		}
		x = b.conv2d(name, x, c, 3, 3, 1, 1, 1, 1, true)
		x = b.relu(name+".relu", x)
	}
	x = b.avgpool("avgpool", x, 1, 1, 0)
	x = b.linear("classifier.0", x, 4096, true, true)
	x = b.relu("classifier.1", x)
	x = b.linear("classifier.3", x, 4096, true, false)
	x = b.relu("classifier.4", x)
	b.classify("classifier.6", x, 1000, labels, false)
}

// convBN is a bias-free convolution followed by batch norm and, when relu is
// set, ReLU.
func (b *builder) convBN(name string, x, cout, kh, kw, s, ph, pw int, relu bool) int {
	x = b.conv2d(name+".conv", x, cout, kh, kw, s, s, ph, pw, false)
	x = b.batchnorm(name+".bn", x)
	if relu {
		x = b.relu(name+".relu", x)
	}
	return x
}

// buildResNet50 is torchvision's resnet50 (v1.5: the stride is on the 3×3
// convolution of each bottleneck): a 7×7/2 stem and 3×3/2 max pool, then
// 3, 4, 6 and 3 bottleneck blocks of widths 64, 128, 256 and 512 (×4 out),
// global average pooling and a 2048-1000 classifier.
func buildResNet50(b *builder, _ Options) {
	x, labels := b.imageInputs(224)
	x = b.convBN("stem", x, 64, 7, 7, 2, 3, 3, true)
	x = b.maxpool("maxpool", x, 3, 2, 1)
	in := 64
	for stage, blocks := range []int{3, 4, 6, 3} {
		width := 64 << stage
		for blk := 0; blk < blocks; blk++ {
			name := "layer" + strconv.Itoa(stage+1) + "." + strconv.Itoa(blk)
			stride := 1
			if blk == 0 && stage > 0 {
				stride = 2
			}
			out := b.convBN(name+".1", x, width, 1, 1, 1, 0, 0, true)
			out = b.convBN(name+".2", out, width, 3, 3, stride, 1, 1, true)
			out = b.convBN(name+".3", out, width*4, 1, 1, 1, 0, 0, false)
			short := x
			if blk == 0 && (stride != 1 || in != width*4) {
				short = b.convBN(name+".downsample", x, width*4, 1, 1, stride, 0, 0, false)
			}
			x = b.add(name+".add", out, short)
			x = b.relu(name+".relu", x)
			in = width * 4
		}
	}
	x = b.avgpool("avgpool", x, 0, 1, 0)
	b.classify("fc", x, 1000, labels, true)
}

// buildDenseNet121 is torchvision's densenet121: growth rate 32, bottleneck
// width 4×32, blocks of 6, 12, 24 and 16 layers with transitions that halve
// the channels and the resolution. Each dense layer (BN, ReLU, 1×1 conv, BN,
// ReLU, 3×3 conv) reads the concatenation of all earlier features of its
// block, materialised by a concat kernel as the reference implementation does.
func buildDenseNet121(b *builder, _ Options) {
	x, labels := b.imageInputs(224)
	x = b.conv2d("features.conv0", x, 64, 7, 7, 2, 2, 3, 3, false)
	x = b.batchnorm("features.norm0", x)
	x = b.relu("features.relu0", x)
	x = b.maxpool("features.pool0", x, 3, 2, 1)
	const growth, bnSize = 32, 4
	blocks := []int{6, 12, 24, 16}
	for bi, layers := range blocks {
		bname := "features.denseblock" + strconv.Itoa(bi+1)
		feats := []int{x}
		for l := 0; l < layers; l++ {
			name := bname + ".denselayer" + strconv.Itoa(l+1)
			in := b.concat(name+".cat", feats...)
			h := b.batchnorm(name+".norm1", in)
			h = b.relu(name+".relu1", h)
			h = b.conv2d(name+".conv1", h, bnSize*growth, 1, 1, 1, 1, 0, 0, false)
			h = b.batchnorm(name+".norm2", h)
			h = b.relu(name+".relu2", h)
			h = b.conv2d(name+".conv2", h, growth, 3, 3, 1, 1, 1, 1, false)
			feats = append(feats, h)
		}
		x = b.concat(bname+".cat", feats...)
		if bi == len(blocks)-1 {
			break
		}
		tname := "features.transition" + strconv.Itoa(bi+1)
		c := b.shape(x)[1]
		x = b.batchnorm(tname+".norm", x)
		x = b.relu(tname+".relu", x)
		x = b.conv2d(tname+".conv", x, c/2, 1, 1, 1, 1, 0, 0, false)
		x = b.avgpool(tname+".pool", x, 2, 2, 0)
	}
	x = b.batchnorm("features.norm5", x)
	x = b.relu("features.relu5", x)
	x = b.avgpool("avgpool", x, 0, 1, 0)
	b.classify("classifier", x, 1000, labels, true)
}

// buildMLP is a small multilayer perceptron for flattened 28×28 images:
// 784-1024-1024-10 with ReLU between the layers (1,863,690 parameters).
func buildMLP(b *builder, _ Options) {
	x := b.input("images", b.fdt, b.batch, 784)
	labels := -1
	if b.train {
		labels = b.input("labels", "int64", b.batch)
	}
	x = b.linear("fc1", x, 1024, true, false)
	x = b.relu("relu1", x)
	x = b.linear("fc2", x, 1024, true, false)
	x = b.relu("relu2", x)
	b.classify("fc3", x, 10, labels, false)
}
