
º
C
image/encoded2
0
.ÿØÿàJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJJÿÙ

image/class/label


image/height
 

image/format

JPEG
&
image/object/bbox/xmin

ÍÌÌ=ÍÌL>