package zoo

import "strconv"

// bc is Inception's BasicConv2d: a bias-free convolution, batch norm, ReLU.
func (b *builder) bc(name string, x, cout, kh, kw, s, ph, pw int) int {
	return b.convBN(name, x, cout, kh, kw, s, ph, pw, true)
}

// buildInceptionV3 is torchvision's inception_v3 with aux_logits=False on
// 299×299 inputs: the stem down to 35×35×192, Mixed_5b–5d (InceptionA),
// Mixed_6a (B), Mixed_6b–6e (C), Mixed_7a (D), Mixed_7b–7c (E), global
// average pooling and a 2048-1000 classifier.
func buildInceptionV3(b *builder, _ Options) {
	x, labels := b.imageInputs(299)
	x = b.bc("Conv2d_1a_3x3", x, 32, 3, 3, 2, 0, 0)
	x = b.bc("Conv2d_2a_3x3", x, 32, 3, 3, 1, 0, 0)
	x = b.bc("Conv2d_2b_3x3", x, 64, 3, 3, 1, 1, 1)
	x = b.maxpool("maxpool1", x, 3, 2, 0)
	x = b.bc("Conv2d_3b_1x1", x, 80, 1, 1, 1, 0, 0)
	x = b.bc("Conv2d_4a_3x3", x, 192, 3, 3, 1, 0, 0)
	x = b.maxpool("maxpool2", x, 3, 2, 0)
	x = b.v3A("Mixed_5b", x, 32)
	x = b.v3A("Mixed_5c", x, 64)
	x = b.v3A("Mixed_5d", x, 64)
	x = b.v3B("Mixed_6a", x)
	x = b.v3C("Mixed_6b", x, 128)
	x = b.v3C("Mixed_6c", x, 160)
	x = b.v3C("Mixed_6d", x, 160)
	x = b.v3C("Mixed_6e", x, 192)
	x = b.v3D("Mixed_7a", x)
	x = b.v3E("Mixed_7b", x)
	x = b.v3E("Mixed_7c", x)
	x = b.avgpool("avgpool", x, 0, 1, 0)
	b.classify("fc", x, 1000, labels, true)
}

func (b *builder) v3A(n string, x, poolFeatures int) int {
	b1 := b.bc(n+".branch1x1", x, 64, 1, 1, 1, 0, 0)
	b5 := b.bc(n+".branch5x5_1", x, 48, 1, 1, 1, 0, 0)
	b5 = b.bc(n+".branch5x5_2", b5, 64, 5, 5, 1, 2, 2)
	b3 := b.bc(n+".branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0)
	b3 = b.bc(n+".branch3x3dbl_2", b3, 96, 3, 3, 1, 1, 1)
	b3 = b.bc(n+".branch3x3dbl_3", b3, 96, 3, 3, 1, 1, 1)
	bp := b.avgpool(n+".branch_pool.avg", x, 3, 1, 1)
	bp = b.bc(n+".branch_pool", bp, poolFeatures, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b1, b5, b3, bp)
}

func (b *builder) v3B(n string, x int) int {
	b3 := b.bc(n+".branch3x3", x, 384, 3, 3, 2, 0, 0)
	bd := b.bc(n+".branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0)
	bd = b.bc(n+".branch3x3dbl_2", bd, 96, 3, 3, 1, 1, 1)
	bd = b.bc(n+".branch3x3dbl_3", bd, 96, 3, 3, 2, 0, 0)
	bp := b.maxpool(n+".branch_pool", x, 3, 2, 0)
	return b.concat(n+".cat", b3, bd, bp)
}

func (b *builder) v3C(n string, x, c7 int) int {
	b1 := b.bc(n+".branch1x1", x, 192, 1, 1, 1, 0, 0)
	b7 := b.bc(n+".branch7x7_1", x, c7, 1, 1, 1, 0, 0)
	b7 = b.bc(n+".branch7x7_2", b7, c7, 1, 7, 1, 0, 3)
	b7 = b.bc(n+".branch7x7_3", b7, 192, 7, 1, 1, 3, 0)
	bd := b.bc(n+".branch7x7dbl_1", x, c7, 1, 1, 1, 0, 0)
	bd = b.bc(n+".branch7x7dbl_2", bd, c7, 7, 1, 1, 3, 0)
	bd = b.bc(n+".branch7x7dbl_3", bd, c7, 1, 7, 1, 0, 3)
	bd = b.bc(n+".branch7x7dbl_4", bd, c7, 7, 1, 1, 3, 0)
	bd = b.bc(n+".branch7x7dbl_5", bd, 192, 1, 7, 1, 0, 3)
	bp := b.avgpool(n+".branch_pool.avg", x, 3, 1, 1)
	bp = b.bc(n+".branch_pool", bp, 192, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b1, b7, bd, bp)
}

func (b *builder) v3D(n string, x int) int {
	b3 := b.bc(n+".branch3x3_1", x, 192, 1, 1, 1, 0, 0)
	b3 = b.bc(n+".branch3x3_2", b3, 320, 3, 3, 2, 0, 0)
	b7 := b.bc(n+".branch7x7x3_1", x, 192, 1, 1, 1, 0, 0)
	b7 = b.bc(n+".branch7x7x3_2", b7, 192, 1, 7, 1, 0, 3)
	b7 = b.bc(n+".branch7x7x3_3", b7, 192, 7, 1, 1, 3, 0)
	b7 = b.bc(n+".branch7x7x3_4", b7, 192, 3, 3, 2, 0, 0)
	bp := b.maxpool(n+".branch_pool", x, 3, 2, 0)
	return b.concat(n+".cat", b3, b7, bp)
}

func (b *builder) v3E(n string, x int) int {
	b1 := b.bc(n+".branch1x1", x, 320, 1, 1, 1, 0, 0)
	b3 := b.bc(n+".branch3x3_1", x, 384, 1, 1, 1, 0, 0)
	b3a := b.bc(n+".branch3x3_2a", b3, 384, 1, 3, 1, 0, 1)
	b3b := b.bc(n+".branch3x3_2b", b3, 384, 3, 1, 1, 1, 0)
	b3 = b.concat(n+".branch3x3.cat", b3a, b3b)
	bd := b.bc(n+".branch3x3dbl_1", x, 448, 1, 1, 1, 0, 0)
	bd = b.bc(n+".branch3x3dbl_2", bd, 384, 3, 3, 1, 1, 1)
	bda := b.bc(n+".branch3x3dbl_3a", bd, 384, 1, 3, 1, 0, 1)
	bdb := b.bc(n+".branch3x3dbl_3b", bd, 384, 3, 1, 1, 1, 0)
	bd = b.concat(n+".branch3x3dbl.cat", bda, bdb)
	bp := b.avgpool(n+".branch_pool.avg", x, 3, 1, 1)
	bp = b.bc(n+".branch_pool", bp, 192, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b1, b3, bd, bp)
}

// buildInceptionV4 is Inception-v4 (arXiv 1602.07261) as in the common
// PyTorch port (timm's inception_v4, 1000 classes) on 299×299 inputs: the
// stem (Mixed_3a, 4a, 5a) down to 35×35×384, 4 Inception-A, Reduction-A,
// 7 Inception-B, Reduction-B, 3 Inception-C, global average pooling and a
// 1536-1000 classifier. BasicConv2d is a bias-free convolution, batch norm
// and ReLU.
func buildInceptionV4(b *builder, _ Options) {
	x, labels := b.imageInputs(299)
	x = b.bc("features.0", x, 32, 3, 3, 2, 0, 0)
	x = b.bc("features.1", x, 32, 3, 3, 1, 0, 0)
	x = b.bc("features.2", x, 64, 3, 3, 1, 1, 1)
	// Mixed_3a
	p := b.maxpool("features.3.maxpool", x, 3, 2, 0)
	c := b.bc("features.3.conv", x, 96, 3, 3, 2, 0, 0)
	x = b.concat("features.3.cat", p, c)
	// Mixed_4a
	b0 := b.bc("features.4.branch0.0", x, 64, 1, 1, 1, 0, 0)
	b0 = b.bc("features.4.branch0.1", b0, 96, 3, 3, 1, 0, 0)
	b1 := b.bc("features.4.branch1.0", x, 64, 1, 1, 1, 0, 0)
	b1 = b.bc("features.4.branch1.1", b1, 64, 1, 7, 1, 0, 3)
	b1 = b.bc("features.4.branch1.2", b1, 64, 7, 1, 1, 3, 0)
	b1 = b.bc("features.4.branch1.3", b1, 96, 3, 3, 1, 0, 0)
	x = b.concat("features.4.cat", b0, b1)
	// Mixed_5a
	c = b.bc("features.5.conv", x, 192, 3, 3, 2, 0, 0)
	p = b.maxpool("features.5.maxpool", x, 3, 2, 0)
	x = b.concat("features.5.cat", c, p)
	i := 6
	for k := 0; k < 4; k++ {
		x = b.v4A("features."+strconv.Itoa(i), x)
		i++
	}
	x = b.v4RedA("features."+strconv.Itoa(i), x)
	i++
	for k := 0; k < 7; k++ {
		x = b.v4B("features."+strconv.Itoa(i), x)
		i++
	}
	x = b.v4RedB("features."+strconv.Itoa(i), x)
	i++
	for k := 0; k < 3; k++ {
		x = b.v4C("features."+strconv.Itoa(i), x)
		i++
	}
	x = b.avgpool("global_pool", x, 0, 1, 0)
	b.classify("last_linear", x, 1000, labels, true)
}

func (b *builder) v4A(n string, x int) int {
	b0 := b.bc(n+".branch0", x, 96, 1, 1, 1, 0, 0)
	b1 := b.bc(n+".branch1.0", x, 64, 1, 1, 1, 0, 0)
	b1 = b.bc(n+".branch1.1", b1, 96, 3, 3, 1, 1, 1)
	b2 := b.bc(n+".branch2.0", x, 64, 1, 1, 1, 0, 0)
	b2 = b.bc(n+".branch2.1", b2, 96, 3, 3, 1, 1, 1)
	b2 = b.bc(n+".branch2.2", b2, 96, 3, 3, 1, 1, 1)
	b3 := b.avgpool(n+".branch3.0", x, 3, 1, 1)
	b3 = b.bc(n+".branch3.1", b3, 96, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b0, b1, b2, b3)
}

func (b *builder) v4RedA(n string, x int) int {
	b0 := b.bc(n+".branch0", x, 384, 3, 3, 2, 0, 0)
	b1 := b.bc(n+".branch1.0", x, 192, 1, 1, 1, 0, 0)
	b1 = b.bc(n+".branch1.1", b1, 224, 3, 3, 1, 1, 1)
	b1 = b.bc(n+".branch1.2", b1, 256, 3, 3, 2, 0, 0)
	b2 := b.maxpool(n+".branch2", x, 3, 2, 0)
	return b.concat(n+".cat", b0, b1, b2)
}

func (b *builder) v4B(n string, x int) int {
	b0 := b.bc(n+".branch0", x, 384, 1, 1, 1, 0, 0)
	b1 := b.bc(n+".branch1.0", x, 192, 1, 1, 1, 0, 0)
	b1 = b.bc(n+".branch1.1", b1, 224, 1, 7, 1, 0, 3)
	b1 = b.bc(n+".branch1.2", b1, 256, 7, 1, 1, 3, 0)
	b2 := b.bc(n+".branch2.0", x, 192, 1, 1, 1, 0, 0)
	b2 = b.bc(n+".branch2.1", b2, 192, 7, 1, 1, 3, 0)
	b2 = b.bc(n+".branch2.2", b2, 224, 1, 7, 1, 0, 3)
	b2 = b.bc(n+".branch2.3", b2, 224, 7, 1, 1, 3, 0)
	b2 = b.bc(n+".branch2.4", b2, 256, 1, 7, 1, 0, 3)
	b3 := b.avgpool(n+".branch3.0", x, 3, 1, 1)
	b3 = b.bc(n+".branch3.1", b3, 128, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b0, b1, b2, b3)
}

func (b *builder) v4RedB(n string, x int) int {
	b0 := b.bc(n+".branch0.0", x, 192, 1, 1, 1, 0, 0)
	b0 = b.bc(n+".branch0.1", b0, 192, 3, 3, 2, 0, 0)
	b1 := b.bc(n+".branch1.0", x, 256, 1, 1, 1, 0, 0)
	b1 = b.bc(n+".branch1.1", b1, 256, 1, 7, 1, 0, 3)
	b1 = b.bc(n+".branch1.2", b1, 320, 7, 1, 1, 3, 0)
	b1 = b.bc(n+".branch1.3", b1, 320, 3, 3, 2, 0, 0)
	b2 := b.maxpool(n+".branch2", x, 3, 2, 0)
	return b.concat(n+".cat", b0, b1, b2)
}

func (b *builder) v4C(n string, x int) int {
	b0 := b.bc(n+".branch0", x, 256, 1, 1, 1, 0, 0)
	b1 := b.bc(n+".branch1_0", x, 384, 1, 1, 1, 0, 0)
	b1a := b.bc(n+".branch1_1a", b1, 256, 1, 3, 1, 0, 1)
	b1b := b.bc(n+".branch1_1b", b1, 256, 3, 1, 1, 1, 0)
	b1 = b.concat(n+".branch1.cat", b1a, b1b)
	b2 := b.bc(n+".branch2_0", x, 384, 1, 1, 1, 0, 0)
	b2 = b.bc(n+".branch2_1", b2, 448, 3, 1, 1, 1, 0)
	b2 = b.bc(n+".branch2_2", b2, 512, 1, 3, 1, 0, 1)
	b2a := b.bc(n+".branch2_3a", b2, 256, 1, 3, 1, 0, 1)
	b2b := b.bc(n+".branch2_3b", b2, 256, 3, 1, 1, 1, 0)
	b2 = b.concat(n+".branch2.cat", b2a, b2b)
	b3 := b.avgpool(n+".branch3.0", x, 3, 1, 1)
	b3 = b.bc(n+".branch3.1", b3, 256, 1, 1, 1, 0, 0)
	return b.concat(n+".cat", b0, b1, b2, b3)
}
