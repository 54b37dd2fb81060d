# The desk demo on screen: runs desk.tscn in a window (godot/run_tests.sh starts it under Xvfb
# with the compatibility renderer, OpenGL on Mesa's llvmpipe), seats the NPC, runs a command
# whose output is longer than the screen, and takes a screenshot once the output is there.
# Checks the shot (the desk's screen is not blank: it holds text-coloured pixels on its dark
# background, in the window and in the screen's own viewport) and the screen's label at the
# moment of the shot (the last line is shown, scrolled to). Writes the PNG to
# $DESKWIRE_SHOT_OUT. Exits 0 when every check passed.
#   xvfb-run godot --rendering-driver opengl3 --path godot/demo -s tests/screenshot.gd
extends SceneTree

const COMMAND := "uname -sr; seq -f 'line %g of 40' 1 40"
const LAST_LINE := "line 40 of 40"

var failures: Array[String] = []


func _initialize() -> void:
	_run.call_deferred()


func check(cond: bool, what: String) -> void:
	print(("ok    " if cond else "FAIL  ") + what)
	if not cond:
		failures.append(what)


func wait_until(done: Callable, seconds: float) -> bool:
	var deadline := Time.get_ticks_msec() + int(seconds * 1000)
	while not done.call() and Time.get_ticks_msec() < deadline:
		await process_frame
	return done.call()


func _run() -> void:
	print("renderer %s on %s" % [RenderingServer.get_current_rendering_driver_name(), RenderingServer.get_video_adapter_name()])
	OS.set_environment("DESKWIRE_DESK_NICK", "goshot")
	var demo: Control = load("res://desk.tscn").instantiate()
	root.add_child(demo)
	var client: DeskRpcClient = demo.get_node("DeskRpcClient")
	var output: RichTextLabel = demo.get_node("ScreenView/Output")
	check(await wait_until(func(): return client.state == "ready", 20.0), "the desk connected (state %s)" % client.state)
	demo.get_node("Layout/Controls/Sit").pressed.emit()
	(demo.get_node("Layout/Controls/Command") as LineEdit).text = COMMAND
	demo.get_node("Layout/Controls/Run").pressed.emit()
	check(await wait_until(func(): return output.get_parsed_text().contains(LAST_LINE), 20.0), "the output reached the screen's label")
	# Let the label lay out, scroll and draw, then take the frame as shown.
	for i in 5:
		await process_frame
	await RenderingServer.frame_post_draw
	var shot := root.get_texture().get_image()
	var screen_image := (demo.get_node("ScreenView") as SubViewport).get_texture().get_image()
	var text := output.get_parsed_text()
	var scroll := output.get_v_scroll_bar()

	var path := OS.get_environment("DESKWIRE_SHOT_OUT")
	if path != "":
		check(shot.save_png(path) == OK, "saved %s (%dx%d)" % [path, shot.get_width(), shot.get_height()])

	# What the label held at the moment of the shot.
	check(text.contains("$ " + COMMAND) and text.contains(LAST_LINE), "the label holds the command and its output")
	check(scroll.max_value > scroll.page and scroll.value + scroll.page >= scroll.max_value - 1, "a long output is scrolled to its end (value %s page %s max %s)" % [scroll.value, scroll.page, scroll.max_value])
	check(output.get_visible_line_count() < output.get_line_count(), "more lines than the screen shows (%d of %d)" % [output.get_visible_line_count(), output.get_line_count()])
	check((demo.get_node("Layout/View/Room/Npc/Tag") as Label3D).text.contains("at desk-1"), "the NPC is shown seated")

	# The desk's screen in the window: project the screen quad's corners through the camera.
	var camera: Camera3D = demo.get_node("Layout/View/Room/Camera")
	var quad: MeshInstance3D = demo.get_node("Layout/View/Room/Desk/Monitor/Screen")
	var view: Control = demo.get_node("Layout/View")
	var half: Vector2 = (quad.mesh as QuadMesh).size / 2
	var polygon := PackedVector2Array()
	for corner in [Vector2(-1, -1), Vector2(1, -1), Vector2(1, 1), Vector2(-1, 1)]:
		var local := Vector3(corner.x * half.x * 0.95, corner.y * half.y * 0.95, 0)
		polygon.append(view.get_global_rect().position + camera.unproject_position(quad.global_transform * local))
	var region := Rect2(polygon[0], Vector2.ZERO)
	for at in polygon:
		region = region.expand(at)
	region = region.intersection(Rect2(Vector2.ZERO, shot.get_size()))
	print("the desk's screen in the shot: %s" % [polygon])
	check(region.size.x > 200 and region.size.y > 100, "the screen is large in the view (%s)" % region)
	var counts := _text_pixels(shot, Rect2i(region), polygon)
	# A blank or unlit screen has no text pixels; the shot here had about 2.5 % (small 3D text).
	check(counts.text > 200 and counts.text > 0.005 * counts.total and counts.dark > 0.3 * counts.total, "the screen in the shot shows text on its background (%d text, %d dark of %d pixels)" % [counts.text, counts.dark, counts.total])
	# The screen's own image: text in its bottom third, where a scrolled output ends.
	var bottom := Rect2i(0, screen_image.get_height() * 2 / 3, screen_image.get_width(), screen_image.get_height() / 3)
	var screen_counts := _text_pixels(screen_image, bottom, PackedVector2Array())
	check(screen_counts.text > 0.02 * screen_counts.total, "the screen's last lines are drawn (%d text pixels of %d)" % [screen_counts.text, screen_counts.total])

	client.close()
	demo.queue_free()
	await process_frame
	print("screenshot: %d failed" % failures.size())
	quit(1 if failures.size() > 0 else 0)


## Pixels in `rect` of `image` (and in `polygon`, unless empty) that are text (the screen's
## green) and dark background.
func _text_pixels(image: Image, rect: Rect2i, polygon: PackedVector2Array) -> Dictionary:
	var counts := {"text": 0, "dark": 0, "total": 0}
	for y in range(rect.position.y, rect.end.y):
		for x in range(rect.position.x, rect.end.x):
			if not polygon.is_empty() and not Geometry2D.is_point_in_polygon(Vector2(x, y), polygon):
				continue
			var c := image.get_pixel(x, y)
			counts.total += 1
			if c.g > 0.45 and c.g > c.r + 0.15:
				counts.text += 1
			elif c.get_luminance() < 0.12:
				counts.dark += 1
	return counts
